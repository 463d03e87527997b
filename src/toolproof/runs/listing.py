"""The runs under an artifact root: finding one by id prefix, listing them all.

A run directory is named by its run id (``<root>/runs/run_<hex>``), but its identity
is its content (the manifest's run id), so a listing reads each manifest rather than
trusting the folder name. Nothing here verifies a run; see
:func:`toolproof.verify.verifier.verify_run`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import RUNS_DIR
from toolproof.contract.layout import (
    CLAIMS_FILE,
    MANIFEST_FILE,
    REPORT_FILE,
    SPEC_FILE,
    TIMINGS_FILE,
    TRACE_FILE,
)
from toolproof.errors import InputError

__all__ = ["RUN_PREFIX_RE", "RunEntry", "find_runs", "list_runs", "read_entry"]

RUN_PREFIX_RE = re.compile(r"^run_[0-9a-f]{0,64}$")
"""A run id or a prefix of one (``run_8f55ea39``)."""


@dataclass(frozen=True)
class RunEntry:
    """What a listing shows of one run directory (read, not verified).

    Attributes:
        path: the run directory.
        run_id: the manifest's run id (``None`` when the manifest is unreadable).
        task: the spec's task (``None`` when unreadable).
        outcome: the stored report's outcome, ``passed`` or ``failed`` (``None`` if unreadable).
        claims: claims in ``claims.json`` (``None`` when unreadable).
        tool_calls: ``tool_called`` events in the trace.
        started_at: ISO 8601 UTC start time from ``timings.json`` (``""`` when unknown).

    """

    path: Path
    run_id: str | None
    task: str | None
    outcome: str | None
    claims: int | None
    tool_calls: int
    started_at: str

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON (``path`` as a string)."""
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "task": self.task,
            "outcome": self.outcome,
            "claims": self.claims,
            "tool_calls": self.tool_calls,
            "started_at": self.started_at,
        }


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _field(document: Any, key: str) -> Any:
    return document.get(key) if isinstance(document, dict) else None


def _tool_calls(trace: Path) -> int:
    try:
        data = trace.read_bytes()
    except OSError:
        return 0
    return data.count(b'"type":"tool_called"')


def read_entry(directory: Path) -> RunEntry:
    """Read what a listing shows of ``directory``; unreadable parts are ``None``."""
    run_id = _field(_json(directory / MANIFEST_FILE), "run_id")
    task = _field(_json(directory / SPEC_FILE), "task")
    outcome = _field(_json(directory / REPORT_FILE), "outcome")
    claims = _json(directory / CLAIMS_FILE)
    started = _field(_json(directory / TIMINGS_FILE), "started_at")
    return RunEntry(
        path=directory,
        run_id=run_id if isinstance(run_id, str) else None,
        task=task if isinstance(task, str) else None,
        outcome=outcome if outcome in ("passed", "failed") else None,
        claims=len(claims) if isinstance(claims, list) else None,
        tool_calls=_tool_calls(directory / TRACE_FILE),
        started_at=started if isinstance(started, str) else "",
    )


def _run_dirs(root: Path) -> list[Path]:
    runs = root / RUNS_DIR
    if not runs.is_dir():
        return []
    return sorted(
        entry
        for entry in runs.iterdir()
        if entry.name.startswith("run_") and entry.is_dir() and not entry.is_symlink()
    )


def list_runs(root: Path) -> list[RunEntry]:
    """Every run directory under ``root/runs``, newest first (then by name).

    Args:
        root: the artifact root.

    Returns:
        One :class:`RunEntry` per ``run_*`` directory, by ``started_at`` descending.

    """
    entries = [read_entry(directory) for directory in _run_dirs(root)]
    entries.sort(key=lambda entry: entry.path.name)
    entries.sort(key=lambda entry: entry.started_at, reverse=True)
    return entries


def find_runs(root: Path, prefix: str) -> list[Path]:
    """The run directories under ``root/runs`` whose name starts with ``prefix``.

    Args:
        root: the artifact root.
        prefix: a run id or a prefix of one (``run_8f55ea39``; a trailing ``…`` or ``...``
            copied from a shortened id is ignored).

    Returns:
        The matching directories, sorted by name (an exact name match alone, if any).

    Raises:
        InputError: ``prefix`` is not a run id prefix (``run_`` and lowercase hex).

    """
    prefix = prefix.removesuffix("…").removesuffix("...")
    if not RUN_PREFIX_RE.match(prefix):
        raise InputError(
            f"{prefix!r} is not a run id or a prefix of one (run_ followed by lowercase hex)",
            path=prefix,
            rule="run id prefix",
        )
    found = [directory for directory in _run_dirs(root) if directory.name.startswith(prefix)]
    exact = [directory for directory in found if directory.name == prefix]
    return exact or found
