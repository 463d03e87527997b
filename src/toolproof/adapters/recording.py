"""Recorded serve sessions: every served call in a live trace, finalized as a run.

``toolproof serve --record ROOT`` opens a *live session* directory
``ROOT/sessions/<stamp>-<pid>/`` holding:

* ``session.json``: when it started, and which ``toolproof.toml`` it serves;
* ``runtime.json``: the :class:`ExecutionRuntime` (the Toolset descriptor);
* ``trace.jsonl``: for every served call that reached a tool, in completion order, one
  block of events written at once and handed to the OS (``flush``) when the call
  returns: ``step_started``, ``tool_called``, ``tool_returned``, a
  ``failure_observed`` for each other failure a layer reported (a retried attempt),
  then for a value ``evidence_registered`` (the exact result bytes, stored under
  ``evidence/``) and ``step_finished``. Each call is one plan step, ``call-00000001``
  and up;
* ``evidence/``: the result bytes, named by their SHA-256.

Finalizing (on SIGTERM/SIGINT, or when stdin closes) turns the live session into an
ordinary run: the calls become the steps of a spec (``policy = "audit"``: a client's
bad call is a warning, not a broken record), the plan is re-executed *frozen* from the
recorded results by the runs executor (no tool is called), the re-executed trace must
equal the live one event for event, and the run directory is committed atomically to
``ROOT/runs/<run_id>`` with its manifest; the live directory is then removed. The
result verifies with ``toolproof verify`` and replays with ``toolproof replay``.

A server killed outright (``kill -9``) leaves the live directory, which has no
manifest and so never verifies. ``recover_session`` (``toolproof verify --recover``;
:mod:`toolproof.adapters.finalize`) keeps the events up to the last complete call
block, reports what it dropped (events of an unfinished block, a torn last line,
unreferenced evidence), and finalizes the rest the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.rundir import write_file
from toolproof.bundle.trace import TraceWriter
from toolproof.contract.evidence import EvidenceSource
from toolproof.contract.runs import ExecutionRuntime, ReasonerSpec
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    EvidenceRegistered,
    FailureObserved,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import InputError, ToolCallError
from toolproof.evidence.encoding import encode_value
from toolproof.evidence.reasoners import reasoner_for
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import canonical_json
from toolproof.runs.spec import iter_refs
from toolproof.tools.observe import Observation
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = [
    "SESSIONS_DIR",
    "SESSION_FILE",
    "SESSION_TASK",
    "SessionRecorder",
    "open_session",
    "step_id",
]

SESSIONS_DIR = "sessions"
"""Where live sessions live under the artifact root."""
SESSION_FILE = "session.json"
"""The marker of a live session directory."""
SESSION_TASK = "MCP serve session"
"""The task of the spec a finalized session becomes."""


def step_id(number: int) -> str:
    """The step id of the ``number``-th served call (from 1): ``call-00000001``."""
    return f"call-{number:08d}"


class _LiveTrace(TraceWriter):
    """The runs trace writer, handing each call block to the OS and forgetting it."""

    def flush(self) -> None:
        """Write buffered events to the OS (they survive a killed process) and drop them."""
        self._file.flush()
        self.events.clear()


@dataclass
class SessionRecorder:
    """Records served calls into a live session (a ``CallObserver`` of the MCP server).

    Attributes:
        root: the artifact root.
        directory: the live session directory.
        started_at: ISO 8601 UTC start time.
        calls: served calls recorded so far.

    """

    root: Path
    directory: Path
    started_at: str
    _trace: _LiveTrace
    _store: EvidenceStore
    _started: float = field(default_factory=time.monotonic)
    calls: int = 0
    closed: bool = False

    def call_started(self, tool: Tool, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Check the call can be recorded; return the token for :meth:`call_finished`.

        Raises:
            ToolCallError: the call is refused, not recorded (kind ``unrecordable``):
                its arguments hold a ``{"$ref": ...}`` object, which a run spec reads as
                a step reference, or have no canonical JSON form (an integer beyond
                2**53, RFC 8785).

        """
        why = None
        try:
            if list(iter_refs(arguments)):
                why = 'hold a {"$ref": ...} object, which a run spec reads as a step reference'
        except InputError:
            why = 'hold a malformed {"$ref": ...} object, which a run spec refuses'
        if why is None:
            try:
                ToolCall(tool=tool.name, arguments=arguments, step=step_id(1))
            except (InputError, ValidationError) as exc:
                detail = exc.message if isinstance(exc, InputError) else str(exc)
                why = f"have no canonical JSON form ({detail})"
        if why is not None:
            failure = ToolFailure(
                kind="unrecordable",
                message=f"call to {tool.name!r} cannot be recorded: its arguments {why}",
                where="arguments",
            )
            raise ToolCallError(failure)
        return tool.name, arguments

    def call_finished(
        self,
        token: tuple[str, dict[str, Any]],
        result: ToolResult,
        reply: bytes,
        seen: Observation,
    ) -> None:
        """Append the call's block of events (and its result bytes as evidence), flushed.

        Failures layers reported besides the one answered (a retry that recovered, a
        layer that swallowed one) follow ``tool_returned`` as ``failure_observed``
        events with the layer that declared it recovered (``recovered_by``),
        deduplicated, as the runs executor records them.
        """
        if self.closed:
            return
        tool, arguments = token
        self.calls += 1
        step = step_id(self.calls)
        emit = self._trace.emit
        call = ToolCall(tool=tool, arguments=arguments, step=step)
        emit(StepStarted, step=step, kind="call")
        emit(ToolCalled, step=step, call_id=call.id, call=call)
        emit(ToolReturned, step=step, call_id=call.id, result=result)
        others: list[tuple[ToolFailure, str]] = []
        for failure in seen.failures:
            entry = (failure, seen.recovered_by(failure))
            if failure != result.failure and entry not in others:
                others.append(entry)
                emit(
                    FailureObserved,
                    step=step,
                    call_id=call.id,
                    failure=entry[0],
                    recovered_by=entry[1],
                )
        if result.failure is not None:
            reason = f"{result.failure.kind}: {result.failure.message}"
            emit(StepFinished, step=step, status="failed", detail={"reason": reason})
        else:
            data, media_type = encode_value(result.value)
            source = EvidenceSource(kind="tool_result", step=step, call=call.id)
            record = self._store.put(data, media_type=media_type, source=source)
            emit(EvidenceRegistered, step=step, evidence=record)
            emit(StepFinished, step=step, status="ok", detail={"evidence": record.id})
        self._trace.flush()

    def close(self) -> None:
        """Stop recording and close the live trace (fsynced); later calls are not recorded.

        Finalize the session with :func:`toolproof.adapters.finalize.finalize_session`.
        """
        if not self.closed:
            self.closed = True
            self._trace.close()


def open_session(root: Path, toolset: Toolset) -> SessionRecorder:
    """Open a live session under ``root/sessions/`` for ``toolset``.

    Args:
        root: the artifact root (created if missing).
        toolset: the served Toolset; its descriptor is the session's runtime.

    Raises:
        InputError: ``root`` exists and is not a directory.

    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InputError(f"--record {str(root)!r}: not a directory", path=str(root))
    now = datetime.now(UTC)
    name = f"{now.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    directory = root / SESSIONS_DIR / name
    directory.mkdir(parents=True)
    started_at = now.isoformat(timespec="milliseconds")
    config = toolset.metadata.get("config_path")
    header = {"started_at": started_at, "config": config, "pid": os.getpid()}
    write_file(directory / SESSION_FILE, json.dumps(header, sort_keys=True).encode("utf-8"))
    reasoner = reasoner_for(ReasonerSpec())
    runtime = ExecutionRuntime(
        mode="live", toolset=toolset.descriptor(), reasoner=reasoner.descriptor(), seed=0
    )
    write_file(directory / "runtime.json", canonical_json(runtime.to_json()))
    trace = _LiveTrace(directory / "trace.jsonl")
    return SessionRecorder(root, directory, started_at, trace, EvidenceStore(directory))


def discard_live(directory: Path) -> None:
    """Remove a live session directory (after its run was committed)."""
    shutil.rmtree(directory, ignore_errors=True)
