"""The one recorder of a run's trace and evidence, and the one emitter of the call block.

Every tool call that lands in a run is written here, whoever chose it: the executor
walking a plan, an MCP client of ``serve --record``, an agent in a recorded session.
The *call block* is, in this order::

    (approval_requested approval_decided? | approval_skipped)? · tool_called · tool_returned ·
    failure_observed* · evidence_registered (a value)

``approval_*`` are what an ``approve`` layer of the call reported
(:func:`~toolproof.tools.observe.note_approval`): the request and the decision, or
the skip of a call no rule gated, written before ``tool_called``, each with the
block's call id.

``failure_observed`` is one event per other failure a layer reported during the call
(a retried attempt; :func:`other_failures`), with the layer that declared it
recovered. A value with no canonical JSON form is recorded as an ``invalid_result``
failure. A value's exact bytes (:func:`~toolproof.evidence.encoding.encode_value`) are
stored once under ``evidence/``. Sessions wrap the block in ``step_started`` /
``step_finished`` (:meth:`Recorder.call_step`), exactly as the executor does for a
``call`` step, so a session's trace is what frozen replay of it writes.

A *model turn* (an agent session's model request and response) is its own block,
:meth:`Recorder.model_block`: ``evidence_registered`` (request bytes) ·
``evidence_registered`` (response bytes) · ``model_turn``, wrapped in a ``model``
step by :meth:`Recorder.model_step` live and by the executor frozen.

Durability (:class:`Durability`):

* ``commit``: the executor's runs. Lines stay in memory and land when the run
  directory is committed (fsynced then, renamed into place); a run killed before
  is never committed.
* ``group``: live sessions. :meth:`Recorder.commit` writes the block in one
  ``write(2)`` before the call is answered, so a killed process loses nothing it
  acknowledged; a background thread starts a sync batch at most every
  :data:`SYNC_INTERVAL` seconds, so a power loss can lose at most the calls
  acknowledged in the last 50 ms plus the time the batch takes. On Linux a batch is
  one ``syncfs(2)`` of the run directory's filesystem (the trace and the evidence
  pack in one call, whatever the call rate; never the machine-wide ``sync(2)``);
  elsewhere it fsyncs the evidence pack and the trace. The trace's whole-file digest
  (the manifest's) is hashed by that thread too, per batch.
* ``each``: fsync on every commit (the comparison figure of the benchmark).

A ``group`` or ``each`` recorder (a live session) stores evidence in one pack file,
``evidence.pack`` (:mod:`toolproof.evidence.pack`): each new item is appended in one
``write(2)``, before the event that registers it; a ``commit`` recorder (a run being
written) stores a file per item under ``evidence/``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from toolproof.bundle.durable import fsync_path, syncfs
from toolproof.bundle.lines import LineShape, encode_field, line_shape
from toolproof.bundle.trace import TraceWriter
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    TRACE_EVENT_ADAPTER,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    EventBase,
    EvidenceRegistered,
    FailureObserved,
    ModelTurn,
    PromptGot,
    RequestRelayed,
    ResourceRead,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from toolproof.errors import CanonicalizationError
from toolproof.evidence.encoding import JSON_MEDIA_TYPE, encode_value, read_contents
from toolproof.evidence.store import EvidenceStore, record_from_json, result_record
from toolproof.identity import (
    canonical_json,
    digest_of_hex_bytes,
    plain_json_encoder,
    sha256_hex,
)
from toolproof.tools.observe import Observation

__all__ = [
    "SYNC_INTERVAL",
    "CallRecord",
    "Durability",
    "ModelExchange",
    "Recorder",
    "call_bytes",
    "call_json",
    "failure_reason",
    "other_failures",
    "spliced_call",
]

_encode = plain_json_encoder()

SYNC_INTERVAL = 0.05
"""Seconds between two fsyncs of a ``group`` recorder, at most (the power-loss window)."""

_CALL_STARTED = LineShape(StepStarted, ("step",), {"kind": "call"})
_MODEL_STARTED = LineShape(StepStarted, ("step",), {"kind": "model"})
_CALLED = LineShape(ToolCalled, ("step", "call_id", "call"))
_RETURNED = LineShape(ToolReturned, ("step", "call_id", "result"))
_OBSERVED = LineShape(FailureObserved, ("step", "call_id", "failure", "recovered_by"))
_FINISHED_OK = LineShape(StepFinished, ("step", "detail"), {"status": "ok"})
_FINISHED_FAILED = LineShape(StepFinished, ("step", "detail"), {"status": "failed"})
_REGISTERED = line_shape(EvidenceRegistered, ("step", "evidence"))
_TURN = LineShape(ModelTurn, ("step", "source", "model", "request", "response", "key", "detail"))
"""The lines of the call and model steps (:mod:`toolproof.bundle.lines`)."""
_REQUEST_KIND = "model_request"
_RESPONSE_KIND = "model_response"


def _turn_record_fragments() -> tuple[bytes, bytes, bytes]:
    """The format of a model turn's evidence record JSON, and the heads of its two sources.

    The record :meth:`EvidenceStore.add` builds sorts ``digest`` · ``id`` · ``media_type``
    · ``path`` · ``schema_version`` · ``size`` · ``source``; its source (no call, no
    detail) ``call`` · ``detail`` · ``kind`` · ``schema_version`` · ``step``. Checked
    against the encoder at import.
    """
    version = encode_field(SCHEMA_VERSION)
    record = (
        b'{"digest":"%%s","id":"%%s","media_type":%%b,"path":"%%s","schema_version":%b,'
        b'"size":%%d,"source":%%b}' % version
    )
    sources = tuple(
        b'{"call":null,"detail":{},"kind":%b,"schema_version":%b,"step":'
        % (encode_field(kind), version)
        for kind in (_REQUEST_KIND, _RESPONSE_KIND)
    )
    for kind, head in zip((_REQUEST_KIND, _RESPONSE_KIND), sources, strict=True):
        media_type = 'text/plain; charset="utf-8"'
        sample = {
            "schema_version": SCHEMA_VERSION,
            "id": "evidence_0a",
            "digest": "sha256:0a",
            "size": 7,
            "media_type": media_type,
            "path": "evidence/0a",
            "source": {
                "schema_version": SCHEMA_VERSION,
                "kind": kind,
                "step": "s",
                "call": None,
                "detail": {},
            },
        }
        spliced = record % (
            b"sha256:0a",
            b"evidence_0a",
            encode_field(media_type),
            b"evidence/0a",
            7,
            head + b'"s"}',
        )
        assert canonical_json(sample) == spliced
    return record, sources[0], sources[1]


_TURN_RECORD, _REQUEST_SOURCE, _RESPONSE_SOURCE = _turn_record_fragments()
_MODEL_STARTED_CODE = _MODEL_STARTED.code
_TURN_CODE = _TURN.code
"""The codes of :meth:`Recorder._chained_model_step`'s own lines, valued in these orders:"""
_TURN_ORDERS: tuple[tuple[LineShape, tuple[str, ...]], ...] = (
    (_MODEL_STARTED, ("step",)),
    (_TURN, ("detail", "key", "model", "request", "response", "source", "step")),
)
for _turn_shape, _turn_order in _TURN_ORDERS:
    if _turn_shape.order != _turn_order:  # a field renamed or added: values misplaced
        raise RuntimeError(f"{_turn_shape.cls.__name__}: fields in the order {_turn_shape.order}")


def _turn_record_json(record: dict[str, Any], source_head: bytes, step_json: bytes) -> bytes:
    """The canonical JSON of a model turn's evidence record built by ``EvidenceStore.add``.

    Args:
        record: what ``store.add(data, media_type=..., kind=..., step=step)`` returned
            (no call, no detail).
        source_head: ``_REQUEST_SOURCE`` or ``_RESPONSE_SOURCE``, for the kind it was
            given.
        step_json: the canonical JSON of ``step``.

    Returns:
        ``canonical_json(record)``, spliced: the digest, id and path are ASCII
        (``sha256:``/``evidence_``/``evidence/`` and hex digits), written as they are.
        A media type the C encoder declines is left to :func:`encode_field` with the
        whole record (the same bytes, or the same error and path).

    Raises:
        CanonicalizationError: the media type has no canonical JSON form.

    """
    media_type = _encode(record["media_type"])
    if media_type is None:
        return encode_field(record)
    return _TURN_RECORD % (
        record["digest"].encode("ascii"),
        record["id"].encode("ascii"),
        media_type,
        record["path"].encode("ascii"),
        record["size"],
        source_head + step_json + b"}",
    )


def _turn_record(
    hex_bytes: bytes, size: int, media_type: str, kind: str, step: str
) -> dict[str, Any]:
    """The plain record ``EvidenceStore.add`` returns for a model turn's bytes (no call, detail)."""
    return result_record(hex_bytes.decode("ascii"), size, media_type, step, None, kind=kind)


def _registered_turn_body(
    hex_bytes: bytes, media_json: bytes, size: int, source_head: bytes, step_json: bytes
) -> tuple[Any, ...]:
    """The chained ``evidence_registered`` line of a turn body stored in the pack.

    Args:
        hex_bytes: the body's SHA-256 as 64 hex digits (ASCII).
        media_json: the canonical JSON of its media type.
        size: its length in bytes.
        source_head: ``_REQUEST_SOURCE`` or ``_RESPONSE_SOURCE``.
        step_json: the canonical JSON of the step id.

    Returns:
        ``(code, record JSON, step JSON)`` for :meth:`TraceWriter.append_chained`: the
        record :meth:`EvidenceStore.add` builds, spliced.

    """
    record_json = _TURN_RECORD % (
        digest_of_hex_bytes(hex_bytes),
        b"evidence_" + hex_bytes,
        media_json,
        b"evidence/" + hex_bytes,
        size,
        source_head + step_json + b"}",
    )
    return _REGISTERED_CODE, record_json, step_json


_CALL_STARTED_CODE = _CALL_STARTED.code
_CALLED_CODE = _CALLED.code
_RETURNED_CODE = _RETURNED.code
_REGISTERED_CODE = _REGISTERED.code
_FINISHED_OK_CODE = _FINISHED_OK.code
"""The codes of :meth:`Recorder._ok_call_step`'s lines, whose values it lists in these orders:"""
for _shape, _order in (
    (_CALL_STARTED, ("step",)),
    (_CALLED, ("call", "call_id", "step")),
    (_RETURNED, ("call_id", "result", "step")),
    (_REGISTERED, ("evidence", "step")),
    (_FINISHED_OK, ("detail", "step")),
):
    if _shape.order != _order:  # a field renamed or added: the values would be misplaced
        raise RuntimeError(f"{_shape.cls.__name__}: fields in the order {_shape.order}")


def _ok_result_head() -> bytes:
    """``{"failure":null,"ok":true,"schema_version":1,"value":`` (``value`` sorts last)."""
    plain = {"schema_version": SCHEMA_VERSION, "ok": True, "value": None, "failure": None}
    encoded = canonical_json(plain)
    assert encoded.endswith(b',"value":null}')
    return encoded[: -len(b"null}")]


_OK_RESULT_HEAD = _ok_result_head()
"""The canonical JSON of a successful :class:`ToolResult` up to its value."""


_APPROVAL_CLASSES: dict[str, type[EventBase]] = {
    "approval_requested": ApprovalRequested,
    "approval_decided": ApprovalDecided,
    "approval_skipped": ApprovalSkipped,
}


class Durability(StrEnum):
    """When recorded events become durable; see the module docstring."""

    COMMIT = "commit"
    GROUP = "group"
    EACH = "each"


def other_failures(seen: Observation, result: ToolResult) -> list[tuple[ToolFailure, str]]:
    """The failures of ``seen`` other than the one ``result`` carries, without repeats.

    Returns:
        ``(failure, recovered_by)`` pairs in the order seen; ``recovered_by`` is the
        layer that declared it recovered from the failure, or ``""``.

    """
    out: list[tuple[ToolFailure, str]] = []
    for failure in seen.failures:
        entry = (failure, seen.recovered_by(failure))
        if failure != result.failure and entry not in out:
            out.append(entry)
    return out


def call_json(
    tool: str, arguments: dict[str, Any], step: str | None, *, copy: bool = False
) -> dict[str, Any]:
    """The plain JSON of a :class:`ToolCall` (its ``id`` included), built without a model.

    The id is computed exactly as the model computes it (the content id of every
    other field); a test holds the two equal.

    Args:
        tool: the tool name.
        arguments: plain JSON arguments.
        step: the plan step.
        copy: return a deep copy of ``arguments`` (parsed back from the canonical
            bytes), so a body that mutates its own arguments cannot change the record.

    Raises:
        CanonicalizationError: ``arguments`` has no canonical JSON form.

    """
    plain = {"schema_version": SCHEMA_VERSION, "tool": tool, "arguments": arguments, "step": step}
    data = canonical_json(plain)
    if copy:
        plain = json.loads(data)
    plain["id"] = f"{ToolCall.ID_KIND}_{hashlib.sha256(data).hexdigest()}"
    return plain


def _call_fragments() -> tuple[bytes, bytes, bytes]:
    """The fixed pieces of a :class:`ToolCall`'s canonical JSON around its fields.

    Its members sort ``arguments`` · ``id`` · ``schema_version`` · ``step`` · ``tool``;
    checked against the encoder at import.
    """
    head, middle, last = (
        b'{"arguments":',
        b',"schema_version":%b,"step":' % (encode_field(SCHEMA_VERSION)),
        b',"tool":',
    )
    sample = {"schema_version": SCHEMA_VERSION, "tool": "t", "arguments": {}, "step": "s"}
    assert canonical_json(sample) == head + b"{}" + middle + b'"s"' + last + b'"t"}'
    sample["id"] = "i"
    assert canonical_json(sample) == head + b'{},"id":"i"' + middle + b'"s"' + last + b'"t"}'
    return head, middle, last


_CALL_HEAD, _CALL_MIDDLE, _CALL_LAST = _call_fragments()
_CALL_ID_PREFIX = f"{ToolCall.ID_KIND}_"
_CALL_ID_HEAD = b',"id":"' + _CALL_ID_PREFIX.encode("ascii")


_TOOL_JSON: dict[str, bytes] = {}
"""The canonical JSON of tool names seen by :func:`call_bytes` (a Toolset's few names)."""
_TOOL_JSON_MAX = 4096


def call_bytes(tool: str, arguments_json: bytes, step: str | None) -> tuple[str, bytes]:
    """The id and the canonical JSON of a :class:`ToolCall`, spliced from its arguments' bytes.

    Args:
        tool: the tool name.
        arguments_json: the canonical JSON of the arguments (``canonical_json(arguments)``).
        step: the plan step.

    Returns:
        ``(id, data)``: the id ``call_<hex>``, as :func:`call_json` computes it, and the
        canonical JSON of the call *with* its id (the ``call`` of ``tool_called``); a
        test holds both to :func:`call_json`.

    Raises:
        CanonicalizationError: ``tool`` or ``step`` has no canonical JSON form.

    """
    return spliced_call(tool, arguments_json, _encode(step) or encode_field(step))


def spliced_call(tool: str, arguments_json: bytes, step_json: bytes) -> tuple[str, bytes]:
    """:func:`call_bytes` given the canonical JSON of the step (``step_json``) too.

    Raises:
        CanonicalizationError: ``tool`` has no canonical JSON form.

    """
    tool_json = _TOOL_JSON.get(tool)
    if tool_json is None:
        tool_json = encode_field(tool)
        if len(_TOOL_JSON) < _TOOL_JSON_MAX:
            _TOOL_JSON[tool] = tool_json
    tail = b"".join((_CALL_MIDDLE, step_json, _CALL_LAST, tool_json, b"}"))
    hex_digest = sha256_hex(b"".join((_CALL_HEAD, arguments_json, tail)))
    call_id = _CALL_ID_PREFIX + hex_digest.decode("ascii")
    return call_id, b"".join((_CALL_HEAD, arguments_json, _CALL_ID_HEAD, hex_digest, b'"', tail))


def failure_reason(failure: ToolFailure) -> str:
    """The ``reason`` a failed call step finishes with: ``"<kind>: <message>"``."""
    return f"{failure.kind}: {failure.message}"


@dataclass(frozen=True)
class ModelExchange:
    """One model turn to record (see :class:`~toolproof.contract.trace.ModelTurn`).

    Attributes:
        source: ``pydantic-ai``, ``openai-agents`` or ``http``.
        model: the model's name as the framework gives it.
        request: the exact request bytes stored as evidence.
        response: the exact response bytes stored as evidence.
        key: ``sha256:<hex>`` of the match key frozen replay matches on.
        request_media_type: the request bytes' media type.
        response_media_type: the response bytes' media type.
        detail: source-specific plain JSON (HTTP: method, URL, status, kept headers).

    """

    source: str
    model: str
    request: bytes
    response: bytes
    key: str
    request_media_type: str = "application/json"
    response_media_type: str = "application/json"
    detail: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def built(
        cls,
        source: str,
        model: str,
        request: bytes,
        response: bytes,
        key: str,
        request_media_type: str = "application/json",
        response_media_type: str = "application/json",
        detail: dict[str, Any] | None = None,
    ) -> ModelExchange:
        """The exchange ``cls(...)`` builds, without its eight ``object.__setattr__`` calls.

        A model recorder's hot path (about 1 us less per turn): the fields are set in
        the instance's ``__dict__`` at once, so the instance is the same (a test holds
        it equal, field by field, to the constructor's); ``detail=None`` is ``{}``.
        """
        turn = object.__new__(cls)
        turn.__dict__.update(
            source=source,
            model=model,
            request=request,
            response=response,
            key=key,
            request_media_type=request_media_type,
            response_media_type=response_media_type,
            detail={} if detail is None else detail,
        )
        return turn


class CallRecord(NamedTuple):
    """One recorded call block (a named tuple: one is built for every recorded call).

    Attributes:
        call_json: the call's plain JSON (``id`` included).
        result: the result as recorded: an ``invalid_result`` failure when the value
            had no canonical JSON form, else what the tool returned.
        evidence_json: the evidence record's plain JSON for a value, ``None`` for a
            failure.

    """

    call_json: dict[str, Any]
    result: ToolResult
    evidence_json: dict[str, Any] | None

    @property
    def call_id(self) -> str:
        """The call id, ``call_<hex>``."""
        return str(self.call_json["id"])

    @property
    def call(self) -> ToolCall:
        """The call as a model (built on each access: keep it if you read it twice)."""
        return ToolCall.model_validate(self.call_json)

    @property
    def evidence(self) -> EvidenceRecord | None:
        """The evidence record of a value as a model (built on each access), else ``None``."""
        return None if self.evidence_json is None else record_from_json(self.evidence_json)


class _GroupSync:
    """A thread that fsyncs what a recorder wrote, at most every ``interval`` seconds."""

    def __init__(self, recorder: Recorder, interval: float) -> None:
        self._recorder = recorder
        self._interval = interval
        self._cond = threading.Condition()
        self._dirty = False
        self._paths: list[str] = []
        self._closing = False
        self.error: OSError | None = None
        self.syncs = 0
        self._thread = threading.Thread(target=self._loop, name="toolproof-group-sync", daemon=True)
        self._thread.start()

    def mark(self, paths: list[str]) -> None:
        """Ask for a sync batch covering everything written so far (and ``paths``).

        Without paths, a batch already asked for needs no lock: the thread sets
        ``_dirty`` back only when it takes the batch, before it syncs, so a batch that
        has not started yet covers the writes made before this call.
        """
        if self._dirty and not paths:
            return
        with self._cond:
            self._paths += paths
            if not self._dirty:  # the thread waits for the first mark only
                self._dirty = True
                self._cond.notify()

    def _loop(self) -> None:
        last = -self._interval
        while True:
            with self._cond:
                while not self._dirty and not self._closing:
                    self._cond.wait()
                if not self._dirty:
                    return
                wait = last + self._interval - time.monotonic()
                if wait > 0:  # stop() cuts the wait short: close() never sits out an interval
                    self._cond.wait_for(lambda: self._closing, timeout=wait)
                paths, self._paths, self._dirty = self._paths, [], False
            try:
                self._recorder.sync_now(paths)
            except OSError as exc:
                self.error = self.error or exc
            self._recorder.trace.hash_written()  # the trace's digest, off the caller's thread
            self.syncs += 1
            last = time.monotonic()

    def stop(self) -> None:
        """Sync what is left and end the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()


class Recorder:
    """Writes one run's (or live session's) ``trace.jsonl`` and ``evidence/``.

    Args:
        directory: the run or live-session directory (``trace.jsonl`` must not exist).
        durability: when events become durable (:class:`Durability`).
        on_event: called with every event as it is recorded (progress displays); the
            event is then built as a validated model, which costs time.
        sync_interval: for ``group``: seconds between fsyncs, at most.

    Attributes:
        trace: the trace writer.
        store: the evidence store.

    """

    def __init__(
        self,
        directory: Path,
        *,
        durability: Durability = Durability.COMMIT,
        on_event: Callable[[TraceEvent], None] | None = None,
        sync_interval: float = SYNC_INTERVAL,
    ) -> None:
        self.directory = Path(directory)
        self.durability = Durability(durability)
        self.on_event = on_event
        buffered = self.durability == Durability.COMMIT
        self.trace = TraceWriter(
            self.directory / TRACE_FILE,
            buffer_bytes=1 << 20 if buffered else 0,
            defer_hash=self.durability == Durability.GROUP,
        )
        self.store = EvidenceStore(self.directory, pack=not buffered)
        self._new_files: list[str] = []
        self._sync = (
            _GroupSync(self, sync_interval) if self.durability == Durability.GROUP else None
        )
        self._closed = False
        self._staged: list[tuple[LineShape, dict[bytes, bytes]]] | None = None
        self._commit_only = buffered

    @property
    def count(self) -> int:
        """Events recorded so far."""
        return self.trace.count

    def emit(self, cls: type[EventBase], **fields: Any) -> None:
        """Record one event of class ``cls`` (fields other than ``idx``/``prev``).

        Nested models are written as their canonical JSON; the line is exactly what
        ``cls(**fields)`` would write (a test holds every event kind to it).

        Raises:
            CanonicalizationError: a field has no canonical JSON form.
            OSError: the trace cannot be written (see :class:`TraceWriter`).

        """
        if self.on_event is not None:
            idx, prev = self.trace.next_position()
            event: TraceEvent = cls(idx=idx, prev=prev, **fields)  # type: ignore[assignment]
            self.trace.append_line(canonical_json(event.to_json()))
            self.on_event(event)
            return
        shape = line_shape(cls, tuple(fields))
        self._put(shape, dict(zip(shape.keys, map(encode_field, fields.values()))))  # noqa: B905

    def _put(self, shape: LineShape, slots: dict[bytes, bytes]) -> None:
        """Record one line of a compiled ``shape`` (``slots``: its given fields' JSON).

        With :attr:`on_event`, the line is parsed back into its validated event first.

        Raises:
            ValidationError: with ``on_event``, the line is not a valid event (not written).
            OSError: the trace cannot be written.

        """
        if self._staged is not None:
            self._staged.append((shape, slots))
            return
        trace = self.trace
        if self.on_event is None:
            trace.append_shaped([(shape, slots)])
            return
        line = trace.line_for(shape, slots)
        event = TRACE_EVENT_ADAPTER.validate_json(line)
        trace.append_line(line)
        self.on_event(event)

    def _stage(self) -> bool:
        """Collect the lines put from now on, to append them in one go (:meth:`_unstage`).

        Returns:
            Whether this call started the staging (nested blocks stage into the outer one;
            with :attr:`on_event`, nothing is staged: each line is checked as it is put).

        Raises:
            OSError: the trace writer is broken (raised before the block stores anything,
                as its first line would have).

        """
        if self.trace.broken is not None:
            raise self.trace.broken
        if self._staged is not None or self.on_event is not None:
            return False
        self._staged = []
        return True

    def _unstage(self) -> None:
        """Append the staged lines (also when the block stopped on an error) and stop staging."""
        staged, self._staged = self._staged, None
        if staged:
            self.trace.append_shaped(staged)

    def call_block(
        self,
        step: str,
        call: dict[str, Any],
        result: ToolResult,
        observed: Iterable[tuple[ToolFailure, str]],
        *,
        admit: Callable[[bytes], None] | None = None,
        approvals: Iterable[dict[str, Any]] = (),
        relayed: Iterable[dict[str, Any]] = (),
        encoded_call: bytes | None = None,
    ) -> CallRecord:
        """Record the call block of one finished call (see the module docstring).

        Args:
            step: the plan step of the call.
            call: the call made, as plain JSON with its ``id`` (``ToolCall.to_json()``
                or :func:`call_json`).
            result: what it returned.
            observed: the other failures seen during it (:func:`other_failures`).
            admit: called with a value's bytes before they are stored; it may raise to
                stop (the executor's evidence budget), after ``failure_observed``.
            approvals: the approval events its layers reported (``type`` and fields
                without ``idx``/``prev``/``step``/``call_id``), written first.
            relayed: the requests the call sent its caller
                (:attr:`~toolproof.tools.observe.Observation.relayed`): each is a
                ``request_relayed`` event after ``failure_observed``, followed by the
                evidence of its request and of its answer.
            encoded_call: the canonical JSON of ``call`` when the caller has it
                (:func:`call_bytes`), so it is not encoded again.

        Returns:
            The :class:`CallRecord`.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        staging = self._stage()
        try:
            return self._block(
                step,
                encode_field(step),
                call,
                result,
                observed,
                admit,
                approvals,
                relayed,
                encoded_call,
            )
        finally:
            if staging:
                self._unstage()

    def _block(
        self,
        step: str,
        step_json: bytes,
        call: dict[str, Any],
        result: ToolResult,
        observed: Iterable[tuple[ToolFailure, str]],
        admit: Callable[[bytes], None] | None,
        approvals: Iterable[dict[str, Any]],
        relayed: Iterable[dict[str, Any]],
        encoded_call: bytes | None,
    ) -> CallRecord:
        data, media_type = b"", ""
        call_id = call["id"]
        if result.ok:
            try:
                data, media_type = encode_value(result.value)
            except CanonicalizationError as exc:
                result = ToolResult.fail(
                    "invalid_result",
                    f"tool {call['tool']!r} returned a value with no canonical JSON form: "
                    f"{exc.message}",
                    where="output",
                )
        for approval in approvals:
            fields = {k: v for k, v in approval.items() if k != "type"}
            self.emit(_APPROVAL_CLASSES[approval["type"]], step=step, call_id=call_id, **fields)
        id_json = encode_field(call_id)
        if encoded_call is None:
            encoded_call = encode_field(call)
        self._put(_CALLED, {b"step": step_json, b"call_id": id_json, b"call": encoded_call})
        if result.failure is None:  # the model's JSON, spliced: value is plain JSON
            value = data if media_type == JSON_MEDIA_TYPE else encode_field(result.value)
            encoded_result = _OK_RESULT_HEAD + value + b"}"
        else:
            encoded_result = encode_field(result)
        self._put(_RETURNED, {b"step": step_json, b"call_id": id_json, b"result": encoded_result})
        for failure, recovered_by in observed:
            slots = {
                b"step": step_json,
                b"call_id": id_json,
                b"failure": encode_field(failure),
                b"recovered_by": encode_field(recovered_by),
            }
            self._put(_OBSERVED, slots)
        for asked in relayed:
            self._relayed(step, call_id, asked)
        if result.failure is not None:
            return CallRecord(call, result, None)
        if admit is not None:
            admit(data)
        record = self.register_json(step, data, media_type, "tool_result", call_id, {})
        return CallRecord(call, result, record)

    def _relayed(self, step: str, call_id: str, asked: dict[str, Any]) -> None:
        method = str(asked["method"])
        answer = asked.get("answer")
        self.emit(
            RequestRelayed,
            step=step,
            call_id=call_id,
            method=method,
            request=asked["request"],
            answer=answer,
            error=str(asked.get("error") or ""),
        )
        detail = {"method": method}
        request = canonical_json(asked["request"])
        self.register_json(step, request, JSON_MEDIA_TYPE, "relayed_request", call_id, detail)
        if answer is not None:
            data = canonical_json(answer)
            self.register_json(step, data, JSON_MEDIA_TYPE, "relayed_answer", call_id, detail)

    def read_block(self, step: str, uri: str, result: dict[str, Any]) -> list[EvidenceRecord]:
        """Record a resource read: ``resource_read``, then each content's evidence.

        Args:
            step: the plan step of the read.
            uri: the URI read.
            result: the ``ReadResourceResult`` (wire form) as answered.

        Returns:
            The evidence records, one per content item (kind ``resource``, see
            :func:`read_contents`).

        Raises:
            InputError: the result's contents are malformed (nothing is recorded).
            OSError: the trace or the evidence cannot be written.

        """
        contents = read_contents(result)
        self.emit(ResourceRead, step=step, uri=uri, result=result)
        return [
            self.register(step, data, media, "resource", None, detail)
            for data, media, detail in contents
        ]

    def prompt_block(
        self, step: str, name: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> list[EvidenceRecord]:
        """Record a prompt get: ``prompt_got``, then the result's canonical JSON as evidence.

        Returns:
            The one evidence record (kind ``prompt``, ``application/json``).

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        self.emit(PromptGot, step=step, name=name, arguments=arguments, result=result)
        detail = {"prompt": name}
        return [
            self.register(step, canonical_json(result), JSON_MEDIA_TYPE, "prompt", None, detail)
        ]

    def exchange_step(
        self, step: str, kind: str, block: Callable[[], list[EvidenceRecord]]
    ) -> list[EvidenceRecord]:
        """Record a ``read`` or ``prompt`` step: ``step_started``, ``block()``, ``step_finished``.

        The step finishes ``ok`` with its evidence ids, as the executor finishes a
        handled step (so a session's read is what frozen re-execution writes). Not
        committed: call :meth:`commit`.

        Raises:
            InputError: ``block`` refused the result (nothing is recorded).
            OSError: the trace or the evidence cannot be written.

        """
        self.emit(StepStarted, step=step, kind=kind)
        records = block()
        detail = {"evidence": [record.id for record in records]}
        self.emit(StepFinished, step=step, status="ok", detail=detail)
        return records

    def register(
        self,
        step: str,
        data: bytes,
        media_type: str,
        kind: str,
        call: str | None,
        detail: dict[str, Any],
    ) -> EvidenceRecord:
        """Store ``data`` exactly as evidence of ``step`` and record ``evidence_registered``.

        Returns:
            The evidence record.

        Raises:
            OSError: the evidence or the trace cannot be written.

        """
        return record_from_json(self.register_json(step, data, media_type, kind, call, detail))

    def register_json(
        self,
        step: str,
        data: bytes,
        media_type: str,
        kind: str,
        call: str | None,
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        """:meth:`register` returning the record's plain JSON (no model is built).

        Raises:
            OSError: the evidence or the trace cannot be written.

        """
        record, created = self.store.add(
            data, media_type=media_type, kind=kind, step=step, call=call, detail=detail
        )
        if created is not None:
            self._new_files.append(created)
        self.emit(EvidenceRegistered, step=step, evidence=record)
        return record

    def call_step(
        self,
        step: str,
        call: dict[str, Any],
        result: ToolResult,
        observed: Iterable[tuple[ToolFailure, str]],
        approvals: Iterable[dict[str, Any]] = (),
        relayed: Iterable[dict[str, Any]] = (),
        *,
        encoded_call: bytes | None = None,
    ) -> CallRecord:
        """Record a whole call step (``step_started``, the call block, ``step_finished``).

        The step finishes ``ok`` with the evidence id, or ``failed`` with the failure's
        reason, as the executor finishes a ``call`` step. Not committed: call
        :meth:`commit`. Arguments as :meth:`call_block`.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        step_json = encode_field(step)
        if (
            encoded_call is not None
            and result.failure is None
            and not observed
            and not approvals
            and not relayed
            and self._staged is None
            and self.on_event is None
        ):
            fast = self._ok_call_step(step, step_json, call, result, encoded_call)
            if fast is not None:
                return fast
        staging = self._stage()
        try:
            self._put(_CALL_STARTED, {b"step": step_json})
            recorded = self._block(
                step, step_json, call, result, observed, None, approvals, relayed, encoded_call
            )
            if recorded.evidence_json is None:
                assert recorded.result.failure is not None
                reason = failure_reason(recorded.result.failure)
                detail = encode_field({"reason": reason})
                self._put(_FINISHED_FAILED, {b"step": step_json, b"detail": detail})
            else:
                detail = b'{"evidence":' + encode_field(recorded.evidence_json["id"]) + b"}"
                self._put(_FINISHED_OK, {b"step": step_json, b"detail": detail})
        finally:
            if staging:
                self._unstage()
        return recorded

    def _ok_call_step(
        self,
        step: str,
        step_json: bytes,
        call: dict[str, Any],
        result: ToolResult,
        encoded_call: bytes,
    ) -> CallRecord | None:
        """:meth:`call_step` of a value returned with nothing observed, approved or relayed.

        The same five lines, spliced without the general block's staging
        (:meth:`_ok_lines`), and the record of :func:`result_record`; a test holds every
        byte to the general path. ``None`` (nothing recorded): the value has no
        canonical JSON form, which the general path records as an ``invalid_result``
        failure.

        Raises:
            OSError: as :meth:`_ok_lines`.

        """
        call_id = call["id"]
        stored = self._ok_lines(step_json, call_id, encoded_call, result.value)
        if stored is None:
            return None
        hex_digest, size, media_type = stored
        return CallRecord(call, result, result_record(hex_digest, size, media_type, step, call_id))

    def ok_call_lines(self, step: str, call_id: str, encoded_call: bytes, value: Any) -> bool:
        """Record the call step of a value returned with nothing observed, approved or relayed.

        :meth:`call_step` for a live session's common call, building neither the call's
        plain JSON nor the evidence record (nothing reads them): the same five lines
        (``step_started``, ``tool_called``, ``tool_returned``, ``evidence_registered``,
        ``step_finished``), byte for byte (a test holds them to :meth:`call_step`). Not
        committed: call :meth:`commit`.

        Args:
            step: the plan step of the call.
            call_id: the call id (``call_<hex>``).
            encoded_call: the canonical JSON of the call, its id included
                (:func:`call_bytes`).
            value: the value the call returned (a successful result's ``value``).

        Returns:
            True when the step was recorded; False (nothing recorded) when this path
            does not apply: lines are staged or checked one by one (``on_event``), or
            the value has no canonical JSON form. Record those with :meth:`call_step`.

        Raises:
            OSError: as :meth:`_ok_lines`.

        """
        if self._staged is not None or self.on_event is not None:
            return False
        step_json = _encode(step) or encode_field(step)
        return self._ok_lines(step_json, call_id, encoded_call, value) is not None

    def _ok_lines(
        self, step_json: bytes, call_id: str, encoded_call: bytes, value: Any
    ) -> tuple[str, int, str] | None:
        """The five lines of a value's call step, spliced; ``(hex, size, media type)`` stored.

        ``None`` (nothing recorded): ``value`` has no canonical JSON form.

        Raises:
            OSError: the trace writer is broken (nothing is recorded), or the value's
                bytes cannot be stored (the lines up to ``tool_returned`` are appended,
                as the general path appends its staged lines).

        """
        trace = self.trace
        if trace.broken is not None:
            raise trace.broken
        encoded = None if type(value) is str else _encode(value)
        if encoded is not None:  # encode_value's bytes, without its two frames
            data, media_type = encoded, JSON_MEDIA_TYPE
        else:
            try:
                data, media_type = encode_value(value)
            except CanonicalizationError:
                return None
        id_json = b'"' + call_id.encode("ascii") + b'"'
        returned = (
            _OK_RESULT_HEAD
            + (data if media_type == JSON_MEDIA_TYPE else encode_field(value))
            + b"}"
        )
        try:
            hex_digest, record_json, created = self.store.add_result_json(
                data, media_type, step_json, call_id
            )
        except OSError:
            trace.append_chained(
                [  # each shape's values in its order (checked at import)
                    (_CALL_STARTED_CODE, step_json),
                    (_CALLED_CODE, encoded_call, id_json, step_json),
                    (_RETURNED_CODE, id_json, returned, step_json),
                ]
            )
            raise
        if created is not None:
            self._new_files.append(created)
        trace.append_chained(
            [
                (_CALL_STARTED_CODE, step_json),
                (_CALLED_CODE, encoded_call, id_json, step_json),
                (_RETURNED_CODE, id_json, returned, step_json),
                (_REGISTERED_CODE, record_json, step_json),
                (
                    _FINISHED_OK_CODE,
                    b'{"evidence":"evidence_' + hex_digest.encode("ascii") + b'"}',
                    step_json,
                ),
            ]
        )
        return hex_digest, len(data), media_type

    def model_block(self, step: str, turn: ModelExchange) -> tuple[dict[str, Any], dict[str, Any]]:
        """Record the block of one model turn: its request and response bytes, then ``model_turn``.

        The block is ``evidence_registered`` (kind ``model_request``) ·
        ``evidence_registered`` (kind ``model_response``) · ``model_turn``.

        Returns:
            The request's and the response's evidence records, as plain JSON.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        staging = self._stage()
        try:
            return self._model_lines(step, encode_field(step), turn)
        finally:
            if staging:
                self._unstage()

    def _model_lines(
        self, step: str, step_json: bytes, turn: ModelExchange
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Put the model block's three lines (staged by the caller); the two records.

        What :meth:`register_json` and :meth:`emit` would write, spliced: each line's
        fields are encoded once (``step`` is given as ``step_json``), the evidence
        records from :func:`_turn_record_json`; a test holds the lines to the events'
        canonical JSON.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        store, new_files, put = self.store, self._new_files, self._put
        records = []
        for data, media_type, kind, source in (
            (turn.request, turn.request_media_type, _REQUEST_KIND, _REQUEST_SOURCE),
            (turn.response, turn.response_media_type, _RESPONSE_KIND, _RESPONSE_SOURCE),
        ):
            record, created = store.add(data, media_type=media_type, kind=kind, step=step)
            if created is not None:
                new_files.append(created)
            record_json = _turn_record_json(record, source, step_json)
            put(_REGISTERED, {b"step": step_json, b"evidence": record_json})
            records.append(record)
        request, response = records
        detail = turn.detail
        slots = {
            b"step": step_json,
            b"source": _encode(turn.source) or encode_field(turn.source),
            b"model": _encode(turn.model) or encode_field(turn.model),
            b"request": _encode(request["id"]) or encode_field(request["id"]),
            b"response": _encode(response["id"]) or encode_field(response["id"]),
            b"key": _encode(turn.key) or encode_field(turn.key),
            b"detail": b"{}" if type(detail) is dict and not detail else encode_field(detail),
        }
        put(_TURN, slots)
        return request, response

    def model_step(self, step: str, turn: ModelExchange) -> tuple[dict[str, Any], dict[str, Any]]:
        """Record a whole model step: ``step_started`` (``model``), the block, ``step_finished``.

        The step finishes ``ok`` with ``detail.evidence`` = ``[request id, response id]``,
        as the executor finishes a frozen ``model`` step. Not committed: call :meth:`commit`.

        Returns:
            The evidence records of the request and of the response.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        step_json = _encode(step) or encode_field(step)
        if self._chains_turns():
            stored = self._chained_model_step(step_json, turn)
            if stored is not None:
                request_hex, response_hex = stored
                return (
                    _turn_record(
                        request_hex,
                        len(turn.request),
                        turn.request_media_type,
                        _REQUEST_KIND,
                        step,
                    ),
                    _turn_record(
                        response_hex,
                        len(turn.response),
                        turn.response_media_type,
                        _RESPONSE_KIND,
                        step,
                    ),
                )
        staging = self._stage()
        try:
            self._put(_MODEL_STARTED, {b"step": step_json})
            request, response = self._model_lines(step, step_json, turn)
            detail = b'{"evidence":[%b,%b]}' % (
                _encode(request["id"]) or encode_field(request["id"]),
                _encode(response["id"]) or encode_field(response["id"]),
            )
            self._put(_FINISHED_OK, {b"step": step_json, b"detail": detail})
        finally:
            if staging:
                self._unstage()
        return request, response

    def live_model_step(self, step: str, turn: ModelExchange) -> None:
        """:meth:`model_step` of a live session's turn, building no records (nobody reads them).

        The same lines and evidence, byte for byte (a test holds them to
        :meth:`model_step`). Not committed: call :meth:`commit`.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        chained = self._chains_turns() and self._chained_model_step(
            _encode(step) or encode_field(step), turn
        )
        if not chained:
            self.model_step(step, turn)

    def _chains_turns(self) -> bool:
        """Whether :meth:`_chained_model_step` applies: a pack store, nothing staged or checked."""
        return self._staged is None and self.on_event is None and self.store.pack is not None

    def _chained_model_step(
        self, step_json: bytes, turn: ModelExchange
    ) -> tuple[bytes, bytes] | None:
        """:meth:`model_step` of a live session's pack store, spliced and chained in one go.

        The same five lines as the general path (each field encoded by the same C
        encoder), appended with one :meth:`TraceWriter.append_chained`; the request and
        response bytes stored with one ``writev`` (:meth:`EvidenceStore.store_pair`).
        A test holds every byte (trace and pack) to the general path.

        Args:
            step_json: the canonical JSON of the step id.
            turn: the exchange.

        Returns:
            The 64 hex digits (ASCII) of the request's and the response's SHA-256, or
            ``None`` (nothing recorded) when a field is one the C encoder declines or has
            no canonical form: the general path records it (or raises its error).

        Raises:
            OSError: the trace writer is broken (nothing is recorded), or the pack cannot
                be written: then neither body is stored and only ``step_started`` is
                appended (as the general path does when the request cannot be stored).

        """
        trace = self.trace
        if trace.broken is not None:
            raise trace.broken
        request_media = _encode(turn.request_media_type)
        response_media = _encode(turn.response_media_type)
        source_json = _encode(turn.source)
        model_json = _encode(turn.model)
        key_json = _encode(turn.key)
        detail = turn.detail
        if type(detail) is dict and not detail:
            detail_json: bytes | None = b"{}"
        else:
            detail_json = _encode(detail)
            if detail_json is None:
                try:
                    detail_json = encode_field(detail)
                except CanonicalizationError:
                    return None
        if (
            request_media is None
            or response_media is None
            or source_json is None
            or model_json is None
            or key_json is None
        ):
            return None
        request_data, response_data = turn.request, turn.response
        try:
            request_hex, response_hex = self.store.store_pair(request_data, response_data)
        except OSError:
            trace.append_chained([(_MODEL_STARTED_CODE, step_json)])
            raise
        request_id = b"evidence_" + request_hex
        response_id = b"evidence_" + response_hex
        request_json = b'"' + request_id + b'"'
        response_json = b'"' + response_id + b'"'
        trace.append_chained(
            [  # each shape's values in its order (checked at import)
                (_MODEL_STARTED_CODE, step_json),
                _registered_turn_body(
                    request_hex, request_media, len(request_data), _REQUEST_SOURCE, step_json
                ),
                _registered_turn_body(
                    response_hex, response_media, len(response_data), _RESPONSE_SOURCE, step_json
                ),
                (
                    _TURN_CODE,
                    detail_json,
                    key_json,
                    model_json,
                    request_json,
                    response_json,
                    source_json,
                    step_json,
                ),
                (
                    _FINISHED_OK_CODE,
                    b'{"evidence":[' + request_json + b"," + response_json + b"]}",
                    step_json,
                ),
            ]
        )
        return request_hex, response_hex

    def commit(self) -> None:
        """Make what was recorded since the last commit land, as :attr:`durability` says.

        ``commit``: nothing (the run directory writer syncs at the end); ``group``: one
        write to the OS now, fsync within :data:`SYNC_INTERVAL`; ``each``: write and
        fsync now.

        Raises:
            OSError: the write (or, for ``each``, the fsync) failed, or an earlier
                background fsync did.

        """
        if self._commit_only:
            return
        sync = self._sync
        if sync is not None and sync.error is not None:
            raise sync.error
        self.trace.flush()
        paths: list[str] = []
        if self._new_files:
            paths, self._new_files = self._new_files, []
        if sync is not None:
            sync.mark(paths)
        else:
            self.sync_now(paths)

    def sync_now(self, paths: Iterable[str] = ()) -> None:
        """Make the trace, the evidence pack and the evidence files ``paths`` durable.

        ``group`` on Linux: one ``syncfs(2)`` of the trace's filesystem (it holds the
        pack too). Otherwise: fsync each of ``paths`` and the evidence folder (when
        any), the pack (when anything was appended since) and the trace.

        Raises:
            OSError: the sync failed (it names the run directory or the file).

        """
        if self._sync is not None and not self._closed:
            try:
                if syncfs(self.trace.fileno):
                    return
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(self.directory)) from exc
        synced_files = False
        for path in paths:
            fsync_path(path)
            synced_files = True
        if synced_files:
            fsync_path(self.store.directory)
        if not self._closed:
            self.store.sync()
            self.trace.sync()

    @property
    def syncs(self) -> int:
        """Background fsyncs done so far (``group``), for the benchmark."""
        return self._sync.syncs if self._sync is not None else 0

    def close(self, *, sync: bool = True) -> tuple[int, str]:
        """Stop the syncer, write what is pending, close the trace; return its size and digest.

        Raises:
            OSError: the final write or fsync failed (the trace is closed anyway).

        """
        if self._sync is not None:
            self._sync.stop()
        try:
            if sync and self.durability != Durability.COMMIT and self._new_files:
                self.sync_now(self._new_files)
            self.store.close(sync=sync)  # the pack is on disk before the trace's last fsync
        finally:
            self._new_files = []
            self._closed = True
        return self.trace.close(sync=sync)
