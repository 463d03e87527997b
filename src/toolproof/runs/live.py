"""Live recordings: sessions (runs whose calls someone else chooses), recorded as they happen.

A *session* is the tool calls made by an MCP client of ``toolproof serve --record``
or by an agent in-process; its :class:`LiveRecording` is the open run directory the
recorder writes them to. It lives in ``ROOT/sessions/<stamp>-<pid>/`` until it is
finalized (:mod:`toolproof.runs.finalize`):

* ``session.json``: when it started, the task, the ``toolproof.toml`` it serves;
  ``runtime.json``: the :class:`ExecutionRuntime` (the Toolset descriptor);
* ``trace.jsonl``: for every call that reached a tool, in completion order, one call
  step written by the :class:`~toolproof.runs.recorder.Recorder` (the emitter the
  executor uses): ``step_started``, the call block, ``step_finished``. Each call is
  one plan step, ``call-00000001`` and up. The block is handed to the OS in one write
  before the call is answered, and fsynced by group commit (at most every 50 ms); a
  model turn (the session's model recorders) is a ``model`` step (``turn-00000001``
  and up). Calls and turns are written when answered, numbered when *admitted*
  (asked): ``call-00000002`` can precede ``call-00000001`` in the trace; frozen
  replay serves repeated identical requests by that number (:func:`admission_number`);
* ``evidence.pack``: the result bytes (and model requests and responses), each item
  appended in one write before the event that registers it (:mod:`toolproof.bundle.pack`).

Reads and prompt gets are steps too (``read-0000000N``, ``prompt-0000000N``); relayed
sampling and elicitation requests are ``request_relayed`` events in the call's block.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.rundir import process_identity, remove_aside, write_file
from toolproof.bundle.steps import numbered_step
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.layout import RUNTIME_FILE, SESSION_FILE, SESSIONS_DIR, TRACE_FILE
from toolproof.contract.runs import ExecutionRuntime, ReasonerSpec
from toolproof.contract.tools import PresentedTools
from toolproof.errors import InputError, RecordingError
from toolproof.evidence.encoding import read_contents
from toolproof.evidence.tool_results_reasoner import ToolResultReasoner
from toolproof.identity import canonical_json
from toolproof.runs.admission import (
    ARGUMENTS_WRAPPER,
    Admission,
    Room,
    admission_number,
    admission_sorted,
    arguments_snapshot,
    is_flat,
    step_id,
    unrecordable,
)
from toolproof.runs.recorder import CallRecord, Durability, ModelExchange, Recorder, call_json
from toolproof.runs.spec import iter_refs
from toolproof.runs.turns import turn_step_id
from toolproof.tools.idempotency import SessionKeys, repeatable
from toolproof.tools.observe import Observed
from toolproof.tools.resources import CONFIG_PATH
from toolproof.tools.toolset import Toolset
from toolproof.verify.model_calls import call_origin, model_call_ids

__all__ = [
    "RESERVE_BYTES",
    "SESSIONS_DIR",
    "SESSION_FILE",
    "SESSION_TASK",
    "Admission",
    "LiveRecording",
    "admission_number",
    "admission_sorted",
    "discard_recording",
    "open_recording",
    "step_id",
]

SESSION_TASK = "MCP serve session"
"""The task of the spec a finalized serve session becomes."""
RESERVE_BYTES = 64 * 1024
"""Free bytes a session's filesystem must have (beyond the arguments) to admit a call."""


@dataclass
class LiveRecording:
    """The open recording of a live session: its directory, recorder and counters.

    See the module docstring for the files it writes.

    Attributes:
        root: the artifact root.
        directory: the live recording's directory (``ROOT/sessions/<stamp>-<pid>``).
        started_at: ISO 8601 UTC start time.
        recorder: the recorder writing its trace and evidence.
        calls: calls recorded so far.
        admitted: calls admitted so far (the last step number handed out).
        turns: model turns recorded so far.
        turns_admitted: model turns admitted so far (the last turn number handed out).
        reads: resource reads recorded so far.
        prompts: prompt gets recorded so far.
        asked_calls: the step of the last turn recorded that asked for each model call id.
        closed: no more calls are recorded.
        broken: the write error that stopped the recording, or ``None``.
        keys: its calls' idempotency keys (:mod:`toolproof.tools.idempotency`), counted
            in admission order; the segments of one session share them.

    """

    root: Path
    directory: Path
    started_at: str
    recorder: Recorder
    keys: SessionKeys
    calls: int = 0
    admitted: int = 0
    turns: int = 0
    turns_admitted: int = 0
    reads: int = 0
    prompts: int = 0
    closed: bool = False
    broken: OSError | None = None
    asked_calls: dict[str, str] = field(default_factory=dict)
    _where: str = ""
    _trace: str = ""
    _room: Room | None = None

    def __post_init__(self) -> None:
        self._where = str(self.directory)
        self._trace = str(self.directory / TRACE_FILE)
        self._room = Room(self._where)

    def _free(self, needed: int) -> tuple[int, int]:
        assert self._room is not None
        recorder = self.recorder
        return self._room.room(recorder.trace.size + recorder.store.stored_bytes, needed)

    def _cannot_write(self, exc: OSError) -> str:
        where = exc.filename or self.directory / TRACE_FILE
        return f"cannot write the recording at {where}: {exc.strerror or exc}"

    def admit(self, tool: str, arguments: Any) -> Admission:
        """Check that a call can be recorded, before its body runs.

        Args:
            tool: the tool (or variant) name.
            arguments: the caller's arguments object.

        Returns:
            The :class:`Admission` to hand to :meth:`record`, with the call's key (``keys``).

        Raises:
            ToolCallError: refused, nothing runs (kind ``unrecordable``): the arguments
                hold a ``{"$ref": ...}`` object or have no canonical JSON form; or the
                recording cannot be written (an earlier write failed; less than
                :data:`RESERVE_BYTES` plus twice the arguments' size is free on the
                filesystem or below ``RLIMIT_FSIZE``: the message names the path).

        """
        why, where = None, "runtime"
        if self.broken is not None:
            why = self._cannot_write(self.broken)
        elif self.closed:
            why = "the session is closed"
        flat = why is None and is_flat(arguments)
        if why is None and not flat and isinstance(arguments, dict):
            where = "arguments"
            try:
                if list(iter_refs(arguments)):
                    why = (
                        'its arguments hold a {"$ref": ...} object, which a run spec reads '
                        "as a step reference"
                    )
            except InputError:
                why = (
                    'its arguments hold a malformed {"$ref": ...} object, which a run spec refuses'
                )
        snapshot: dict[str, Any] = {}
        encoded = b""
        if why is None:
            where = "arguments"
            try:
                snapshot, encoded = arguments_snapshot(tool, arguments, flat)
                needed = RESERVE_BYTES + 2 * (len(encoded) + ARGUMENTS_WRAPPER)
            except (InputError, ValidationError) as exc:
                detail = exc.message if isinstance(exc, InputError) else str(exc)
                why = f"its arguments have no canonical JSON form ({detail})"
        if why is None:
            where = "runtime"
            try:
                free, below_limit = self._free(needed)
            except OSError as exc:
                why = self._cannot_write(exc)
            else:
                if free < needed:
                    error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._trace)
                    why = (
                        f"{self._cannot_write(error)} ({free} bytes free, {needed} needed "
                        "to record the call)"
                    )
                elif below_limit < needed:
                    error = OSError(errno.EFBIG, os.strerror(errno.EFBIG), self._trace)
                    why = (
                        f"{self._cannot_write(error)} (the process's file-size limit "
                        f"RLIMIT_FSIZE leaves {below_limit} bytes, {needed} needed)"
                    )
        if why is not None:
            raise unrecordable(tool, why, where)
        self.admitted += 1
        step = step_id(self.admitted)
        call_id = call_json(tool, snapshot, step)["id"]
        return Admission(tool, snapshot, step, call_id, self.keys.key(tool, encoded))

    def record(self, admission: Admission, observed: Observed) -> CallRecord:
        """Record one finished call as the next step, written before it is answered.

        Args:
            admission: what :meth:`admit` returned for the call.
            observed: what the call returned and what its layers reported
                (:func:`~toolproof.tools.observe.observe`; ``Observed(result)`` for a
                call no layer reported on).

        Returns:
            The :class:`CallRecord` (the result recorded: an ``invalid_result`` failure
            when the value has no canonical JSON form).

        Raises:
            ToolCallError: the call ran but its block cannot be written (kind
                ``unrecordable``, naming the path); the session records nothing more.

        """
        if self.closed or self.broken is not None:
            raise unrecordable(admission.tool, self._cannot_write(self.broken or OSError()))
        self.calls += 1
        step = admission.step or step_id(self.calls)
        if admission.step and admission.recorded_id:
            call = {
                "schema_version": SCHEMA_VERSION,
                "tool": admission.tool,
                "arguments": admission.arguments,
                "step": step,
                "id": admission.recorded_id,
            }
        else:
            call = call_json(admission.tool, admission.arguments, step)
        origin = call_origin((observed.origin or {}).get("model_call_id"), self.asked_calls)
        if origin != observed.origin:  # linked to a turn of this segment
            observed = replace(observed, origin=origin)
        try:
            recorded = self.recorder.call_step(step, call, observed, admission.idempotency_key)
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise unrecordable(admission.tool, f"it ran, but {self._cannot_write(exc)}") from exc
        return recorded

    def admit_turn(self, source: str) -> str:
        """Check that a model turn can be recorded, before the model is asked.

        Returns:
            The step the turn is recorded as (``turn-00000001`` and up), numbered here,
            in the order turns are asked, so concurrent turns answered out of that
            order keep it; hand it to :meth:`record_turn`. A turn whose model fails
            before answering leaves its number unused.

        Raises:
            RecordingError: the session is closed, an earlier write failed, or the
                filesystem has less than :data:`RESERVE_BYTES` free (the message names the
                path); the model is not asked.

        """
        why = None
        if self.broken is not None:
            why = self._cannot_write(self.broken)
        elif self.closed:
            why = "the session is closed"
        else:
            try:
                free, below_limit = self._free(RESERVE_BYTES)
            except OSError as exc:
                why = self._cannot_write(exc)
            else:
                if min(free, below_limit) < RESERVE_BYTES:
                    error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._trace)
                    why = f"{self._cannot_write(error)} ({min(free, below_limit)} bytes of room)"
        if why is not None:
            raise RecordingError(
                f"a {source} model turn cannot be recorded: {why}", path=str(self.directory)
            )
        self.turns_admitted += 1
        return turn_step_id(self.turns_admitted)

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """Record one model turn as a ``model`` step, before its response is handed on.

        Args:
            turn: the exchange (:class:`~toolproof.runs.recorder.ModelExchange`); the
                tool-call ids its response holds are noted in :attr:`asked_calls`.
            step: the step :meth:`admit_turn` returned for it (``""``: numbered now).

        Returns:
            The step id (``turn-00000001`` and up).

        Raises:
            RecordingError: it cannot be written (naming the path); nothing more is.

        """
        if self.closed or self.broken is not None:
            raise RecordingError(
                f"a {turn.source} model turn cannot be recorded: "
                f"{self._cannot_write(self.broken or OSError())}",
                path=str(self.directory),
            )
        self.turns += 1
        if not step:
            self.turns_admitted += 1
            step = turn_step_id(self.turns_admitted)
        try:
            self.recorder.model_step(step, turn)
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise RecordingError(
                f"a {turn.source} model turn was answered, but {self._cannot_write(exc)}",
                path=str(self.directory),
            ) from exc
        self.asked_calls.update(dict.fromkeys(model_call_ids(turn.source, turn.response), step))
        return step

    def record_read(self, uri: str, result: dict[str, Any]) -> list[EvidenceRecord]:
        """Record one answered resource read as the next ``read`` step, before it is answered.

        The step is ``read-0000000N`` (N counts the session's reads from 1): ``step_started``
        (kind ``read``), ``resource_read``, one ``evidence_registered`` per content item
        (kind ``resource``: a text's UTF-8, a blob's decoded bytes), ``step_finished``.

        Args:
            uri: the URI read.
            result: the ``ReadResourceResult`` as answered (wire form).

        Returns:
            The evidence records, one per content item.

        Raises:
            ToolCallError: kind ``unrecordable``: the session is closed or broken, the
                contents are malformed, or the block cannot be written.

        """
        what = f"resources/read {uri!r}"
        self._check_open(what)
        try:
            read_contents(result)
        except InputError as exc:
            raise unrecordable(what, exc.message, "output") from exc
        self.reads += 1
        step = numbered_step("read", self.reads)
        return self._exchange(
            what, step, "read", lambda: self.recorder.read_block(step, uri, result)
        )

    def record_prompt(
        self, name: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> list[EvidenceRecord]:
        """Record one answered prompt get as the next ``prompt`` step (``prompt-0000000N``).

        Events: ``step_started`` (kind ``prompt``), ``prompt_got``, the result's canonical
        JSON as evidence (kind ``prompt``), ``step_finished``.

        Raises:
            ToolCallError: kind ``unrecordable``: closed, broken, or not written.

        """
        what = f"prompts/get {name!r}"
        self._check_open(what)
        self.prompts += 1
        step = numbered_step("prompt", self.prompts)
        block = lambda: self.recorder.prompt_block(step, name, arguments, result)  # noqa: E731
        return self._exchange(what, step, "prompt", block)

    def _check_open(self, what: str) -> None:
        if self.closed or self.broken is not None:
            raise unrecordable(what, self._cannot_write(self.broken or OSError()))

    def _exchange(
        self, what: str, step: str, kind: str, block: Callable[[], list[EvidenceRecord]]
    ) -> list[EvidenceRecord]:
        try:
            records = self.recorder.exchange_step(step, kind, block)
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise unrecordable(what, f"it ran, but {self._cannot_write(exc)}") from exc
        return records

    def close(self) -> None:
        """Stop recording and close the trace (fsynced); finalize with :mod:`.finalize`.

        Raises:
            RecordingError: the last write or fsync failed (the live directory is kept).

        """
        if self.closed:
            return
        self.closed = True
        try:
            self.recorder.close()
        except OSError as exc:
            self.broken = self.broken or exc
        if self.broken is not None:
            raise RecordingError(
                f"session {self.directory}: {self._cannot_write(self.broken)}; what was "
                "written before is kept for `toolproof verify --recover`",
                path=str(self.directory),
            )


def open_recording(
    root: Path,
    toolset: Toolset,
    *,
    task: str = SESSION_TASK,
    durability: Durability = Durability.GROUP,
    name: str = "",
    session_id: str | None = None,
    presented: PresentedTools | None = None,
) -> LiveRecording:
    """Open a live recording under ``root/sessions/`` for the calls made to ``toolset``.

    Args:
        root: the artifact root (created if missing).
        toolset: the Toolset whose calls are recorded; its descriptor is the runtime.
        task: the task of the run the session becomes.
        durability: when recorded calls become durable (default group commit).
        name: the directory's name under ``sessions/`` (default ``<stamp>-<pid>``).
        session_id: the id its calls' idempotency keys name (``None``: the directory's name).
        presented: an agent session's tools as presented to its framework (the runtime's).

    Raises:
        InputError: ``root`` exists and is not a directory.
        RecordingError: the session directory cannot be written (a full disk, a
            read-only filesystem); nothing is left of it.

    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InputError(f"--record {str(root)!r}: not a directory", path=str(root))
    now = datetime.now(UTC)
    name = name or f"{now.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    directory = root / SESSIONS_DIR / name
    started_at = now.isoformat(timespec="milliseconds")
    config = toolset.resources.get(CONFIG_PATH)
    header = {
        "started_at": started_at,
        "config": config,
        "pid": os.getpid(),
        "process": process_identity(os.getpid()),  # the pid alone may name another later
    }
    if task != SESSION_TASK:
        header["task"] = task
    reasoner, session = ToolResultReasoner(ReasonerSpec()).descriptor(), session_id or name
    runtime = ExecutionRuntime(  # repeatable: what acted-once holds calls to
        toolset=toolset.descriptor(),
        reasoner=reasoner,
        session=session,
        repeatable=repeatable(tool.spec for tool in toolset),
        presented=presented,
    )
    try:
        directory.mkdir(parents=True)
        write_file(directory / SESSION_FILE, json.dumps(header, sort_keys=True).encode("utf-8"))
        write_file(directory / RUNTIME_FILE, canonical_json(runtime.to_json()))
        recorder = Recorder(directory, durability=durability)
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RecordingError(
            f"cannot open a recorded session under {root / SESSIONS_DIR}: "
            f"{exc.strerror or exc} ({exc.filename or directory})",
            path=str(exc.filename or directory),
        ) from exc
    keys = SessionKeys.of(session, runtime.toolset)
    return LiveRecording(root, directory, started_at, recorder, keys)


def discard_recording(directory: Path) -> None:
    """Remove a live recording's directory (after its run was committed): :func:`remove_aside`."""
    remove_aside(directory)
