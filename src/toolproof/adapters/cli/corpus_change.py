"""Which corpus documents changed under a retrieval tool whose descriptor changed.

A refused ``replay --config`` names the tool and the descriptor fields that changed
(:func:`toolproof.runs.replay.describe_tool_change`); for a ``[[retrieval]]`` tool the
fingerprint moves when any document does, so this reads the documents the run
recorded (the ``document`` and ``document_digest`` of every hit in the trace) and the
corpus folder the config names now, and lists each document whose digest differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolproof.errors import InputError

__all__ = ["document_changes"]


def _recorded(trace: Path, tools: set[str]) -> dict[str, dict[str, str]]:
    """``{tool: {document path: digest}}`` from the hits the run's retrieval calls returned."""
    called: dict[str, str] = {}
    found: dict[str, dict[str, str]] = {}
    for line in trace.read_bytes().splitlines():
        try:
            event: Any = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("type") == "tool_called":
            tool = (event.get("call") or {}).get("tool")
            if tool in tools:
                called[str(event.get("call_id"))] = str(tool)
        elif event.get("type") == "tool_returned" and event.get("call_id") in called:
            value = (event.get("result") or {}).get("value")
            hits = value.get("hits") if isinstance(value, dict) else None
            for hit in hits if isinstance(hits, list) else []:
                if isinstance(hit, dict) and "document" in hit and "document_digest" in hit:
                    tool = called[str(event["call_id"])]
                    found.setdefault(tool, {})[str(hit["document"])] = str(hit["document_digest"])
    return found


def document_changes(config: Path, run: Path, tools: list[str]) -> list[str]:
    """Each recorded document of ``tools`` whose digest differs in the corpus ``config`` names.

    Args:
        config: the ``toolproof.toml`` replay compares against.
        run: the run directory.
        tools: the names of the tools whose descriptor changed.

    Returns:
        ``["retrieve: document a.txt sha256:old -> sha256:new", "...: document b.txt
        sha256:old -> (missing)"]``, in tool then path order; empty when nothing can be
        said (no retrieval tool changed, or its corpus cannot be read).

    """
    from toolproof.config import load_config
    from toolproof.contract.layout import TRACE_FILE
    from toolproof.evidence.corpus import load_corpus

    try:
        parsed, _ = load_config(config)
    except InputError:
        return []
    corpora = {source.name: source.corpus for source in parsed.retrieval if source.name in tools}
    if not corpora:
        return []
    recorded = _recorded(run / TRACE_FILE, set(corpora))
    lines = []
    for tool in sorted(corpora):
        try:
            corpus = load_corpus(config.parent / corpora[tool])
        except InputError:
            continue
        now = {str(pin["path"]): str(pin["digest"]) for pin in corpus.pins()}
        for path, before in sorted(recorded.get(tool, {}).items()):
            after = now.get(path, "(missing)")
            if after != before:
                lines.append(f"{tool}: document {path} {before} -> {after}")
    return lines
