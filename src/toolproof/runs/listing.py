"""The runs under an artifact root: finding one by id prefix, listing them all.

A run directory is named by its run id (``<root>/runs/run_<hex>``), but its identity
is its content (the manifest's run id), so a listing reads each manifest rather than
trusting the folder name. Nothing here verifies a run; see
:func:`toolproof.verify.verifier.verify_run`.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import RUNS_DIR
from toolproof.bundle.trace import READ_BLOCK_BYTES
from toolproof.contract.layout import (
    CLAIMS_FILE,
    MANIFEST_FILE,
    REPORT_FILE,
    SPEC_FILE,
    TIMINGS_FILE,
    TRACE_FILE,
)
from toolproof.errors import InputError

__all__ = [
    "RUN_PREFIX_RE",
    "RunEntry",
    "count_tool_calls",
    "find_runs",
    "list_runs",
    "read_entry",
    "spec_task",
]

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


_CALLED = b'"type":"tool_called"}\n'
"""How a ``tool_called`` line ends: ``type`` is its last member in canonical JSON (sorted
keys), so a nested ``{"type":"tool_called"}`` in a value is never counted."""
_COUNTS: OrderedDict[tuple[int, ...], int] = OrderedDict()
_COUNTS_KEPT = 256
_COUNTS_LOCK = threading.Lock()
_SMALL_SPEC = 1 << 20
_SPEC_TAIL = 64 * 1024
_TASK_KEY = b',"task":'
_TOOLSET_KEY = ',"toolset":'


def count_tool_calls(trace: Path) -> int | None:
    """The ``tool_called`` events of a trace file, counted in one pass in bounded memory.

    Reads the file 1 MiB at a time (``bytes.count``: about disk speed; a 3 GB trace of a
    million calls is one pass) and remembers the count of the last 256 files counted,
    keyed by device, inode, size and modification time, so a listing served again does
    not read them again (a committed run never changes; a changed file is counted anew).
    A line counts when it ends with ``"type":"tool_called"}``, as every ``tool_called``
    event's canonical JSON does. Nothing is verified.

    Returns:
        The count, or ``None`` when the file cannot be read (absent, not a file).

    """
    try:
        with trace.open("rb", buffering=0) as file:
            stat = os.fstat(file.fileno())
            key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
            with _COUNTS_LOCK:
                if key in _COUNTS:
                    _COUNTS.move_to_end(key)
                    return _COUNTS[key]
            count, carry = 0, b""
            while block := file.read(READ_BLOCK_BYTES):
                data = carry + block
                count += data.count(_CALLED)
                carry = data[-(len(_CALLED) - 1) :]
    except OSError:
        return None
    with _COUNTS_LOCK:
        _COUNTS[key] = count
        while len(_COUNTS) > _COUNTS_KEPT:
            _COUNTS.popitem(last=False)
    return count


def spec_task(spec: Path) -> str | None:
    """The ``task`` of a run's ``spec.json``, read in bounded memory and time.

    A spec up to 1 MiB is parsed whole. A bigger one (a recorded session's spec restates
    every call as a step: about 116 MB for a million calls) is read from its last 64 KiB
    only: in canonical JSON (sorted keys) ``task`` is the member before ``toolset``, the
    last one, and ``,"task":`` cannot occur inside a string (a quote there is escaped),
    so its last occurrence is the top-level one; what follows it must be exactly a
    string, ``,"toolset":`` and a string, and ``}``. Nothing is verified.

    Returns:
        The task, or ``None`` when the file cannot be read or is not shaped so (a task
        longer than the tail read included).

    """
    try:
        with spec.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size <= _SMALL_SPEC:
                task = _field(json.loads(file.read()), "task")
                return task if isinstance(task, str) else None
            file.seek(size - _SPEC_TAIL)
            tail = file.read()
        at = tail.rfind(_TASK_KEY)
        if at < 0:
            return None
        text = tail[at + len(_TASK_KEY) :].decode("utf-8")
        decoder = json.JSONDecoder()
        task, end = decoder.raw_decode(text)
        if not isinstance(task, str) or not text.startswith(_TOOLSET_KEY, end):
            return None
        toolset, end = decoder.raw_decode(text, end + len(_TOOLSET_KEY))
    except (OSError, ValueError):
        return None
    return task if isinstance(toolset, str) and text[end:].strip() == "}" else None


def read_entry(directory: Path) -> RunEntry:
    """Read what a listing shows of ``directory``; unreadable parts are ``None``."""
    run_id = _field(_json(directory / MANIFEST_FILE), "run_id")
    task = spec_task(directory / SPEC_FILE)
    outcome = _field(_json(directory / REPORT_FILE), "outcome")
    claims = _json(directory / CLAIMS_FILE)
    started = _field(_json(directory / TIMINGS_FILE), "started_at")
    return RunEntry(
        path=directory,
        run_id=run_id if isinstance(run_id, str) else None,
        task=task if isinstance(task, str) else None,
        outcome=outcome if outcome in ("passed", "failed") else None,
        claims=len(claims) if isinstance(claims, list) else None,
        tool_calls=count_tool_calls(directory / TRACE_FILE) or 0,
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
