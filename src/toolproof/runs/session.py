"""Live sessions: runs whose calls someone else chooses, recorded as they happen.

A *session* records tool calls made by an MCP client of ``toolproof serve --record``
or by an agent in-process. It lives in ``ROOT/sessions/<stamp>-<pid>/`` until it is
finalized (:mod:`toolproof.runs.finalize`):

* ``session.json``: when it started, the task, and which ``toolproof.toml`` it serves;
* ``runtime.json``: the :class:`ExecutionRuntime` (the Toolset descriptor);
* ``trace.jsonl``: for every call that reached a tool, in completion order, one call
  step written by the :class:`~toolproof.runs.recorder.Recorder` (the emitter the
  executor uses): ``step_started``, the call block, ``step_finished``. Each call is
  one plan step, ``call-00000001`` and up. The block is handed to the OS in one write
  before the call is answered, and fsynced by group commit (at most every 50 ms);
  A model turn recorded by the session's model recorders is a ``model`` step
  (``turn-00000001`` and up): ``step_started``, the model block, ``step_finished``.
  Calls and turns are written when they are answered, but numbered when they are
  *admitted* (asked): ``call-00000002`` can precede ``call-00000001`` in the trace,
  and the number is the order the agent asked in (:func:`admission_number`), which is
  what frozen replay serves repeated identical requests by;
* ``evidence.pack``: the result bytes (and model requests and responses), each item
  appended in one write before the event that registers it
  (:mod:`toolproof.evidence.pack`); finalizing writes the run's ``evidence/<sha256
  hex>`` files.

Resource reads and prompt gets are steps too (:meth:`LiveSession.record_read`,
:meth:`LiveSession.record_prompt`: ``read-0000000N``, ``prompt-0000000N``, kinds
``read`` and ``prompt``), and the sampling and elicitation requests a call relayed to
its client are ``request_relayed`` events inside that call's block.

The surface is three steps per call: :meth:`LiveSession.admit` before the body runs
(it refuses a call that cannot be recorded, so nothing runs unrecorded),
:meth:`LiveSession.record` after it, and :meth:`LiveSession.close` at the end.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import ValidationError

from toolproof.bundle.rundir import write_file
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.layout import RUNTIME_FILE, TRACE_FILE
from toolproof.contract.runs import ExecutionRuntime, ReasonerSpec
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.errors import InputError, RecordingError, ToolCallError
from toolproof.evidence.encoding import read_contents
from toolproof.evidence.reasoners import ToolResultReasoner
from toolproof.failures import FailureKind, FailureWhere
from toolproof.identity import canonical_json, plain_json_encoder
from toolproof.runs.recorder import (
    CallRecord,
    Durability,
    ModelExchange,
    Recorder,
    call_bytes,
    call_json,
    other_failures,
    spliced_call,
)
from toolproof.runs.spec import iter_refs
from toolproof.runs.turns import turn_step_id
from toolproof.tools.observe import Observation
from toolproof.tools.resources import CONFIG_PATH
from toolproof.tools.toolset import Toolset

__all__ = [
    "RESERVE_BYTES",
    "SESSIONS_DIR",
    "SESSION_FILE",
    "SESSION_TASK",
    "Admission",
    "LiveSession",
    "admission_number",
    "admission_sorted",
    "discard_live",
    "open_session",
    "step_id",
]

_encode = plain_json_encoder()

SESSIONS_DIR = "sessions"
"""Where live sessions live under the artifact root."""
SESSION_FILE = "session.json"
"""The marker of a live session directory."""
SESSION_TASK = "MCP serve session"
"""The task of the spec a finalized serve session becomes."""
RESERVE_BYTES = 64 * 1024
"""Free bytes a session's filesystem must have (beyond the arguments) to admit a call."""


def step_id(number: int) -> str:
    """The step id of the ``number``-th admitted call (from 1): ``call-00000001``."""
    return f"call-{number:08d}"


_NUMBERED = re.compile(r"(?:call|turn)-([0-9]{8})")
_T = TypeVar("_T")


def admission_number(step: str) -> int | None:
    """The admission number a session gave step ``step``, or ``None`` if it has none.

    A session numbers its call steps (``call-00000007``: 7) and model steps
    (``turn-00000003``: 3) in the order they were admitted, that is asked; a run
    spec's own step ids (``read``, ``lookup``) have no such number.
    """
    matched = _NUMBERED.fullmatch(step)
    return int(matched.group(1)) if matched else None


def admission_sorted(items: Iterable[_T], step: Callable[[_T], str]) -> list[_T]:
    """``items`` (in trace order) in the order they were admitted, when all were numbered.

    Args:
        items: recorded calls or turns of one run, in the order the trace holds them
            (the order they were answered).
        step: the step id of an item.

    Returns:
        The items sorted by :func:`admission_number` when every item has one (a
        session's steps; before admission numbering, model steps were numbered as
        they were answered, so such a run keeps its trace order); otherwise the trace
        order unchanged (a run spec's steps).

    """
    listed = list(items)
    numbers = [admission_number(step(item)) for item in listed]
    if any(number is None for number in numbers):
        return listed
    order = sorted(range(len(listed)), key=lambda i: numbers[i] or 0)
    return [listed[i] for i in order]


class Admission(NamedTuple):
    """A call admitted for recording (returned by :meth:`LiveSession.admit`).

    Immutable (a named tuple: built in a fraction of a frozen dataclass's time, on the
    path of every recorded call); ``admission._replace(step=...)`` makes a changed copy.

    Attributes:
        tool: the tool name.
        arguments: a copy of the arguments as admitted (the body may mutate its own).
        step: the step the call is recorded as (``call-00000001``), fixed at admission
            so the call id is known before the body runs (an ``approve`` layer binds
            its decision to it).
        encoded_call: the canonical JSON of the call (its id included) when
            :meth:`LiveSession.admit` computed it, else ``b""``.
        recorded_id: the call id when :meth:`LiveSession.admit` computed it, else ``""``.

    """

    tool: str
    arguments: dict[str, Any]
    step: str = ""
    encoded_call: bytes = b""
    recorded_id: str = ""

    @property
    def call_id(self) -> str:
        """The id the call is recorded under (``call_<hex>``)."""
        if self.recorded_id:
            return self.recorded_id
        return str(call_json(self.tool, self.arguments, self.step)["id"])


def _unrecordable(tool: str, why: str, where: str = "runtime") -> ToolCallError:
    what = tool if " " in tool else f"call to {tool!r}"  # "resources/read 'uri'" as it is
    failure = ToolFailure(
        kind=FailureKind.UNRECORDABLE,
        message=f"{what} cannot be recorded: {why}",
        where=FailureWhere(where),
    )
    return ToolCallError(failure)


_SCALARS = frozenset({str, int, bool, type(None)})
"""Argument values a flat snapshot copies as they are (``json.loads`` of their canonical
JSON gives them back equal: a float is not one, ``1.0`` comes back ``1``)."""
_ARGUMENTS_WRAPPER = len(b'{"arguments":}')


def _flat(arguments: Any) -> bool:
    """Whether ``arguments`` is a plain dict of scalars with no ``$ref`` key (no walk needed)."""
    if type(arguments) is not dict or "$ref" in arguments:
        return False
    scalars = _SCALARS
    return all(type(value) in scalars for value in arguments.values())


def _snapshot(tool: str, arguments: Any, flat: bool) -> tuple[dict[str, Any], bytes]:
    """A copy of the arguments as admitted, and their canonical JSON.

    A flat dict (:func:`_flat`) is copied as it is; anything else is parsed back from
    its canonical JSON (a deep copy the body cannot reach).

    Raises:
        ValidationError: ``arguments`` is not an object.
        CanonicalizationError: it has no canonical JSON form (the path starts
            ``$.arguments``).

    """
    if not isinstance(arguments, dict):
        ToolCall(tool=tool, arguments=arguments, step=step_id(1))  # the refusal
    encoded = _encode(arguments)
    if encoded is None:  # the exact encoder decides
        encoded = canonical_json({"arguments": arguments})[_ARGUMENTS_WRAPPER - 1 : -1]
    return (dict(arguments) if flat else json.loads(encoded)), encoded


ROOM_INTERVAL = 0.01
"""Seconds a free-space reading (``statvfs(2)``) is reused for, at most."""
ROOM_SLACK = 64 * 1024 * 1024
"""Free bytes a reused reading must keep beyond what this session wrote since it was taken.

A reading is reused only while it was taken less than :data:`ROOM_INTERVAL` ago *and*
it leaves this much room after the bytes the session wrote since and the call's own
need; otherwise ``statvfs`` is asked again. So a filesystem with less than 64 MiB free
(the small tmpfs of the full-disk tests) is asked before every call, and a disk can
only be found full late if *other* writers fill more than 64 MiB of it within 10 ms.
"""


class _Room:
    """The free-space check of a session, with ``statvfs(2)`` read at most every 10 ms.

    See :data:`ROOM_SLACK` for when a reading is reused.
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._taken = float("-inf")
        self._free = 0
        self._limit = 0
        self._written = 0

    def room(self, written: int, needed: int) -> tuple[int, int]:
        """The filesystem's free bytes, and the room ``RLIMIT_FSIZE`` leaves the trace.

        Args:
            written: bytes the session wrote so far (trace and evidence).
            needed: bytes the call about to be admitted needs.

        Returns:
            ``(free, below_limit)`` in bytes; ``free`` is the last reading less what
            was written since when the reading is reused.

        Raises:
            OSError: ``statvfs`` failed.

        """
        now = time.monotonic()
        free = self._free - (written - self._written)
        if now - self._taken >= ROOM_INTERVAL or free - needed < ROOM_SLACK:
            stat = os.statvfs(self._directory)
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            self._free = free = stat.f_bavail * stat.f_frsize
            self._limit = sys.maxsize if limit == resource.RLIM_INFINITY else limit
            self._written, self._taken = written, now
        below_limit = sys.maxsize if self._limit == sys.maxsize else self._limit - written
        return free, below_limit

    def ample(self, written: int, needed: int) -> bool:
        """Whether the last reading, reused as :meth:`room` would reuse it, leaves ``needed``.

        A hot path's check without the tuple: True only when :meth:`room` would answer
        from the last reading (no ``statvfs``) with room for ``needed`` bytes both on the
        filesystem and below the file-size limit; False when it would read again or
        refuse (ask :meth:`room` then).

        Args:
            written: bytes the session wrote so far (trace and evidence).
            needed: bytes the call or turn about to be admitted needs.

        """
        return (
            time.monotonic() - self._taken < ROOM_INTERVAL
            and self._free - (written - self._written) - needed >= ROOM_SLACK
            and self._limit - written >= needed
        )


@dataclass
class LiveSession:
    """A live session being recorded (see the module docstring).

    Attributes:
        root: the artifact root.
        directory: the live session directory.
        started_at: ISO 8601 UTC start time.
        recorder: the recorder writing its trace and evidence.
        calls: calls recorded so far.
        admitted: calls admitted so far (the last step number handed out).
        turns: model turns recorded so far.
        turns_admitted: model turns admitted so far (the last turn number handed out).
        reads: resource reads recorded so far.
        prompts: prompt gets recorded so far.
        closed: no more calls are recorded.
        broken: the write error that stopped the recording, or ``None``.

    """

    root: Path
    directory: Path
    started_at: str
    recorder: Recorder
    calls: int = 0
    admitted: int = 0
    turns: int = 0
    turns_admitted: int = 0
    reads: int = 0
    prompts: int = 0
    closed: bool = False
    broken: OSError | None = None
    _where: str = ""
    _trace: str = ""
    _room: _Room | None = None

    def __post_init__(self) -> None:
        self._where = str(self.directory)
        self._trace = str(self.directory / TRACE_FILE)
        self._room = _Room(self._where)

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
            The :class:`Admission` to hand to :meth:`record`.

        Raises:
            ToolCallError: the call is refused, nothing runs (kind ``unrecordable``): its
                arguments hold a ``{"$ref": ...}`` object (a run spec reads it as a step
                reference) or have no canonical JSON form (nested past 256 levels, an
                integer of more than 4300 digits); or the recording cannot be written (an
                earlier write failed; the filesystem has less than :data:`RESERVE_BYTES`
                plus twice the arguments' size free; or the file-size limit
                ``RLIMIT_FSIZE`` leaves less: the message names the path and the error).

        """
        if type(arguments) is dict and self.broken is None and not self.closed:
            admitted = self._admit_flat(tool, arguments)
            if admitted is not None:
                return admitted
        return self._admit_checked(tool, arguments)

    def _admit_checked(self, tool: str, arguments: Any) -> Admission:
        """:meth:`admit` with every check walked, saying why it refuses (the general path)."""
        why, where = None, "runtime"
        if self.broken is not None:
            why = self._cannot_write(self.broken)
        elif self.closed:
            why = "the session is closed"
        flat = why is None and _flat(arguments)
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
                snapshot, encoded = _snapshot(tool, arguments, flat)
                needed = RESERVE_BYTES + 2 * (len(encoded) + _ARGUMENTS_WRAPPER)
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
                trace = self._trace
                if free < needed:
                    error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), trace)
                    why = (
                        f"{self._cannot_write(error)} ({free} bytes free, {needed} needed "
                        "to record the call)"
                    )
                elif below_limit < needed:
                    error = OSError(errno.EFBIG, os.strerror(errno.EFBIG), trace)
                    why = (
                        f"{self._cannot_write(error)} (the process's file-size limit "
                        f"RLIMIT_FSIZE leaves {below_limit} bytes, {needed} needed)"
                    )
        if why is not None:
            raise _unrecordable(tool, why, where)
        self.admitted += 1
        step = step_id(self.admitted)
        call_id, encoded_call = call_bytes(tool, encoded, step)
        return Admission(tool, snapshot, step, encoded_call, call_id)

    def _admit_flat(self, tool: str, arguments: dict[str, Any]) -> Admission | None:
        """:meth:`admit` of a flat dict of scalars with room to record it, or ``None``.

        The common call, admitted without the general path's walks: ``None`` when the
        arguments are not flat (:func:`_flat`), the C encoder declines them, or the last
        free-space reading is stale or short (:meth:`_Room.ample`; the general path then
        reads again, decides, and says why).
        """
        if "$ref" in arguments:
            return None
        scalars = _SCALARS
        for value in arguments.values():
            if type(value) not in scalars:
                return None
        encoded = _encode(arguments)
        if encoded is None:
            return None
        needed = RESERVE_BYTES + 2 * (len(encoded) + _ARGUMENTS_WRAPPER)
        recorder = self.recorder
        assert self._room is not None
        if not self._room.ample(recorder.trace.size + recorder.store.stored_bytes, needed):
            return None
        self.admitted = number = self.admitted + 1
        step_json = b'"call-%08d"' % number  # step_id(number), whose JSON needs no escape
        call_id, encoded_call = spliced_call(tool, encoded, step_json)
        return Admission(
            tool, dict(arguments), step_json[1:-1].decode("ascii"), encoded_call, call_id
        )

    def record(
        self, admission: Admission, result: ToolResult, seen: Observation | None = None
    ) -> CallRecord:
        """Record one finished call as the next step, written before it is answered.

        Args:
            admission: what :meth:`admit` returned for the call.
            result: what the call returned.
            seen: what its layers reported (:func:`~toolproof.tools.observe.observe_failures`);
                the failures other than the returned one become ``failure_observed``.

        Returns:
            The :class:`CallRecord` (the result recorded: an ``invalid_result`` failure
            when the value has no canonical JSON form).

        Raises:
            ToolCallError: the call ran but its block cannot be written (kind
                ``unrecordable``, naming the path); the session records nothing more.

        """
        if self.closed or self.broken is not None:
            raise _unrecordable(admission.tool, self._cannot_write(self.broken or OSError()))
        self.calls += 1
        step = admission.step or step_id(self.calls)
        encoded_call = admission.encoded_call if admission.step and admission.encoded_call else None
        if encoded_call is None:
            call = call_json(admission.tool, admission.arguments, step)
        else:
            call = {
                "schema_version": SCHEMA_VERSION,
                "tool": admission.tool,
                "arguments": admission.arguments,
                "step": step,
                "id": admission.recorded_id,
            }
        observed: list[tuple[ToolFailure, str]] = []
        approvals: list[dict[str, Any]] = []
        relayed: list[dict[str, Any]] = []
        if seen is not None and (seen.failures or seen.approvals or seen.relayed):
            observed = other_failures(seen, result)
            approvals, relayed = seen.approvals, seen.relayed
        try:
            recorded = self.recorder.call_step(
                step, call, result, observed, approvals, relayed, encoded_call=encoded_call
            )
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise _unrecordable(admission.tool, f"it ran, but {self._cannot_write(exc)}") from exc
        return recorded

    def record_result(
        self, admission: Admission, result: ToolResult, seen: Observation | None = None
    ) -> ToolResult:
        """:meth:`record`, returning only the result as recorded (an agent session's call).

        The same bytes as :meth:`record` (a test holds them equal); a value returned
        by a call :meth:`admit` admitted, with nothing observed, approved or relayed, is
        written by :meth:`Recorder.ok_call_lines` without building the
        :class:`CallRecord` (its call and evidence record) nobody reads.

        Returns:
            ``record(admission, result, seen).result``.

        Raises:
            ToolCallError: as :meth:`record`.

        """
        if (
            result.failure is None
            and admission.encoded_call
            and admission.step
            and (seen is None or not (seen.failures or seen.approvals or seen.relayed))
            and not self.closed
            and self.broken is None
        ):
            recorder = self.recorder
            try:
                done = recorder.ok_call_lines(
                    admission.step, admission.recorded_id, admission.encoded_call, result.value
                )
                if done:
                    self.calls += 1
                    recorder.commit()
            except OSError as exc:
                self.calls += 1
                self.broken = exc
                raise _unrecordable(
                    admission.tool, f"it ran, but {self._cannot_write(exc)}"
                ) from exc
            if done:
                return result
        return self.record(admission, result, seen).result

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
        recorder = self.recorder
        why = None
        if self.broken is not None:
            why = self._cannot_write(self.broken)
        elif self.closed:
            why = "the session is closed"
        elif self._room is None or not self._room.ample(
            recorder.trace.size + recorder.store.stored_bytes, RESERVE_BYTES
        ):  # the last free-space reading does not do: read again
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
            turn: the exchange (:class:`~toolproof.runs.recorder.ModelExchange`).
            step: the step :meth:`admit_turn` returned for it; ``""``: the next turn
                number, handed out now.

        Returns:
            The step id (``turn-00000001`` and up).

        Raises:
            RecordingError: the turn cannot be written (the message names the path); the
                session records nothing more.

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
            self.recorder.live_model_step(step, turn)
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise RecordingError(
                f"a {turn.source} model turn was answered, but {self._cannot_write(exc)}",
                path=str(self.directory),
            ) from exc
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
            raise _unrecordable(what, exc.message, "output") from exc
        self.reads += 1
        step = f"read-{self.reads:08d}"
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
        step = f"prompt-{self.prompts:08d}"
        block = lambda: self.recorder.prompt_block(step, name, arguments, result)  # noqa: E731
        return self._exchange(what, step, "prompt", block)

    def _check_open(self, what: str) -> None:
        if self.closed or self.broken is not None:
            raise _unrecordable(what, self._cannot_write(self.broken or OSError()))

    def _exchange(
        self, what: str, step: str, kind: str, block: Callable[[], list[EvidenceRecord]]
    ) -> list[EvidenceRecord]:
        try:
            records = self.recorder.exchange_step(step, kind, block)
            self.recorder.commit()
        except OSError as exc:
            self.broken = exc
            raise _unrecordable(what, f"it ran, but {self._cannot_write(exc)}") from exc
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


def open_session(
    root: Path,
    toolset: Toolset,
    *,
    task: str = SESSION_TASK,
    durability: Durability = Durability.GROUP,
) -> LiveSession:
    """Open a live session under ``root/sessions/`` for ``toolset``.

    Args:
        root: the artifact root (created if missing).
        toolset: the Toolset whose calls are recorded; its descriptor is the runtime.
        task: the task of the run the session becomes.
        durability: when recorded calls become durable (default group commit).

    Raises:
        InputError: ``root`` exists and is not a directory.
        RecordingError: the session directory cannot be written (a full disk, a
            read-only filesystem); nothing is left of it.

    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InputError(f"--record {str(root)!r}: not a directory", path=str(root))
    now = datetime.now(UTC)
    name = f"{now.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    directory = root / SESSIONS_DIR / name
    started_at = now.isoformat(timespec="milliseconds")
    config = toolset.resources.get(CONFIG_PATH)
    header = {"started_at": started_at, "config": config, "pid": os.getpid()}
    if task != SESSION_TASK:
        header["task"] = task
    reasoner = ToolResultReasoner(ReasonerSpec())
    runtime = ExecutionRuntime(
        mode="live", toolset=toolset.descriptor(), reasoner=reasoner.descriptor(), seed=0
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
    return LiveSession(root, directory, started_at, recorder)


def discard_live(directory: Path) -> None:
    """Remove a live session directory (after its run was committed)."""
    shutil.rmtree(directory, ignore_errors=True)
