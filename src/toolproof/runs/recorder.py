"""The one recorder of a run's trace and evidence, and the one emitter of the call block.

Every tool call that lands in a run is written here, whoever chose it: the executor
walking a plan, an MCP client of ``serve --record``, an agent in a recorded session.
The *call block* is, in this order (``policy_decided``: :mod:`toolproof.tools.policy`)::

    policy_decided? · (approval_requested approval_decided? | approval_skipped)? ·
    tool_called · tool_returned · failure_observed* · evidence_registered (a value)

``tool_called`` carries the call's idempotency key (``idempotency_key``, outside
``call``) when :attr:`~toolproof.tools.observe.Observed.idempotency_key` holds one.
``approval_*`` are what an ``approve`` layer reported
(:func:`~toolproof.tools.observe.note_approval`); ``failure_observed`` is one event per
other failure a layer reported (:attr:`~toolproof.tools.observe.Observed.failures`): both
travel with the call's result as one :class:`~toolproof.tools.observe.Observed`. A value
with no canonical JSON form is recorded as an ``invalid_result`` failure; a value's exact bytes
(:func:`~toolproof.evidence.encoding.encode_value`) are stored once as evidence.
Sessions wrap the block in ``step_started`` / ``step_finished``
(:meth:`Recorder.call_step`), as the executor does for a ``call`` step, so a
session's trace is what frozen replay of it writes. A *model turn* is its own block
(:meth:`Recorder.model_block`: two ``evidence_registered``, a third for a framework's
streamed bytes, then ``model_turn``),
wrapped in a ``model`` step by :meth:`Recorder.model_step`.

A block is a list of events: the recorder collects them as plain JSON
(:func:`~toolproof.bundle.trace.event_json`) and hands them to the trace writer at
once, which chains them and writes them as one chunk (one ``write(2)`` per block at
:meth:`Recorder.commit`; when that lands: :mod:`toolproof.runs.durability`). A live
session's recorder stores evidence in one pack file (:mod:`toolproof.bundle.pack`),
each item appended before the event that registers it; a run's, a file per item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolproof.bundle.trace import TraceWriter, event_json
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.tools import ToolResult
from toolproof.contract.trace import (
    TRACE_EVENT_ADAPTER,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    EventBase,
    EvidenceRegistered,
    FailureObserved,
    ModelTurn,
    PolicyDecided,
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
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import canonical_json
from toolproof.runs.durability import SYNC_INTERVAL, Durability, GroupSync, sync_run
from toolproof.runs.recorded import (
    CallRecord,
    ModelExchange,
    call_json,
    failure_reason,
    returned,
)
from toolproof.tools.observe import Observed

__all__ = [
    "SYNC_INTERVAL",
    "CallRecord",
    "Durability",
    "ModelExchange",
    "Recorder",
    "call_json",
    "failure_reason",
]

_APPROVAL_CLASSES: dict[str, type[EventBase]] = {
    cls.model_fields["type"].default: cls
    for cls in (ApprovalRequested, ApprovalDecided, ApprovalSkipped, PolicyDecided)
}


class Recorder:
    """Writes one run's (or live session's) ``trace.jsonl`` and ``evidence.pack``.

    Args:
        directory: the run or live-session directory (``trace.jsonl`` must not exist).
        durability: when events become durable (:class:`Durability`).
        on_event: called with every event as it is recorded (progress displays); the
            event is then built as a validated model, which costs time.
        sync_interval: for ``group``: seconds between fsyncs, at most.
        adopt: the items of a pack already in ``directory`` for the evidence store to
            take as they lie (:class:`~toolproof.evidence.store.EvidenceStore`).

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
        adopt: Sequence[tuple[str, int, int]] = (),
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
        self.store = EvidenceStore(self.directory, live=not buffered, adopt=adopt)
        self._sync = (
            GroupSync(self.sync_now, self.trace.hash_written, sync_interval)
            if self.durability == Durability.GROUP
            else None
        )
        self._closed = False
        self._block: list[dict[str, Any]] | None = None

    @property
    def count(self) -> int:
        """Events recorded so far."""
        return self.trace.count

    def emit(self, cls: type[EventBase], **fields: Any) -> None:
        """Record one event of class ``cls`` (fields other than ``idx``/``prev``).

        Inside a block, the event joins it (written with it); otherwise it is appended
        now. The line is exactly what ``cls(**fields)`` would write (a test holds every
        event kind to it).

        Raises:
            CanonicalizationError: a field has no canonical JSON form.
            OSError: the trace cannot be written (see :class:`TraceWriter`).

        """
        event = event_json(cls, fields)
        if self._block is not None:
            self._block.append(event)
        else:
            self._write([event])

    def _write(self, events: list[dict[str, Any]]) -> None:
        """Hand ``events`` to the trace writer (with :attr:`on_event`, each validated first)."""
        trace = self.trace
        if self.on_event is None:
            trace.append_events(events)
            return
        for event in events:
            event["idx"], event["prev"] = trace.next_position()
            checked = TRACE_EVENT_ADAPTER.validate_python(event)
            trace.append_line(canonical_json(checked.to_json()))
            self.on_event(checked)

    @contextmanager
    def _collecting(self) -> Iterator[None]:
        """Collect the events emitted inside into one block, written when it ends.

        Written also when it stops on an error (what it recorded until then); a nested
        block joins the outer one. Raises ``OSError`` first if the trace writer is broken.
        """
        if self.trace.broken is not None:
            raise self.trace.broken
        if self._block is not None:
            yield
            return
        self._block = []
        try:
            yield
        finally:
            block, self._block = self._block, None
            if block:
                self._write(block)

    def call_block(
        self,
        step: str,
        call: dict[str, Any],
        observed: Observed,
        *,
        admit: Callable[[bytes], None] | None = None,
    ) -> CallRecord:
        """Record the call block of one finished call (see the module docstring).

        Args:
            step: the plan step of the call.
            call: the call made, as plain JSON with its ``id`` (``ToolCall.to_json()``
                or :func:`call_json`).
            observed: what it returned and what its layers reported (and who asked
                for it: :attr:`Observed.origin` becomes fields of ``tool_called``): the approval
                events first, the other failures as ``failure_observed``, each relayed
                request as ``request_relayed`` (after ``failure_observed``) followed by
                the evidence of its request and of its answer.
            admit: called with a value's bytes before they are stored; it may raise to
                stop (the executor's evidence budget), after ``failure_observed``.

        Returns:
            The :class:`CallRecord`.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        with self._collecting():
            return self._call_events(step, call, observed, admit)

    def _call_events(
        self,
        step: str,
        call: dict[str, Any],
        observed: Observed,
        admit: Callable[[bytes], None] | None,
        key: str | None = None,
    ) -> CallRecord:
        result = observed.result
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
        decided = () if observed.policy is None else (observed.policy,)
        for approval in (*decided, *observed.approvals):
            fields = {k: v for k, v in approval.items() if k != "type"}
            self.emit(_APPROVAL_CLASSES[approval["type"]], step=step, call_id=call_id, **fields)
        linked = dict(observed.origin or {})
        key = key or observed.idempotency_key
        if key is not None:  # outside ``call``: the call's content id does not depend on it
            linked["idempotency_key"] = key
        self.emit(ToolCalled, step=step, call_id=call_id, call=call, **linked)
        self.emit(ToolReturned, step=step, call_id=call_id, result=returned(result, media_type))
        for failure, recovered_by in observed.failures:
            fields = {"failure": failure, "recovered_by": recovered_by}
            self.emit(FailureObserved, step=step, call_id=call_id, **fields)
        for asked in observed.relayed:
            self._relayed(step, call_id, asked)
        if result.failure is not None:
            return CallRecord(call, result, None)
        if admit is not None:
            admit(data)
        record = self.register(step, data, media_type, "tool_result", call_id, {})
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
        self.register(step, request, JSON_MEDIA_TYPE, "relayed_request", call_id, detail)
        if answer is not None:
            data = canonical_json(answer)
            self.register(step, data, JSON_MEDIA_TYPE, "relayed_answer", call_id, detail)

    def read_block(self, step: str, uri: str, result: dict[str, Any]) -> list[EvidenceRecord]:
        """Record a resource read: ``resource_read``, then each content's evidence.

        ``result`` is the ``ReadResourceResult`` (wire form) as answered; the records are
        one per content item (kind ``resource``, see :func:`read_contents`).

        Raises:
            InputError: the result's contents are malformed (nothing is recorded).
            OSError: the trace or the evidence cannot be written.

        """
        contents = read_contents(result)
        with self._collecting():
            self.emit(ResourceRead, step=step, uri=uri, result=result)
            records = [
                self.register(step, data, media, "resource", None, detail)
                for data, media, detail in contents
            ]
        return [EvidenceRecord.model_validate(record) for record in records]

    def prompt_block(
        self, step: str, name: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> list[EvidenceRecord]:
        """Record a prompt get: ``prompt_got``, then the result's canonical JSON as evidence.

        Returns:
            The one evidence record (kind ``prompt``, ``application/json``).

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        data = canonical_json(result)
        with self._collecting():
            self.emit(PromptGot, step=step, name=name, arguments=arguments, result=result)
            record = self.register(step, data, JSON_MEDIA_TYPE, "prompt", None, {"prompt": name})
        return [EvidenceRecord.model_validate(record)]

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
        with self._collecting():
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
    ) -> dict[str, Any]:
        """Store ``data`` exactly as evidence of ``step`` and record ``evidence_registered``.

        Returns:
            The evidence record as plain JSON (``EvidenceRecord.model_validate`` of it
            is the model).

        Raises:
            OSError: the evidence or the trace cannot be written.

        """
        record = self.store.put(
            data, media_type=media_type, kind=kind, step=step, call=call, detail=detail
        )
        self.emit(EvidenceRegistered, step=step, evidence=record)
        return record

    def call_step(
        self,
        step: str,
        call: dict[str, Any],
        observed: Observed,
        idempotency_key: str = "",
    ) -> CallRecord:
        """Record a whole call step (``step_started``, the call block, ``step_finished``).

        The step finishes ``ok`` with the evidence id, or ``failed`` with the failure's
        reason, as the executor finishes a ``call`` step. Not committed: call
        :meth:`commit`. Arguments, result and errors as :meth:`call_block`;
        ``idempotency_key`` (the call's admission's, ``""``: none) is recorded in
        ``tool_called``, else ``observed``'s.
        """
        with self._collecting():
            self.emit(StepStarted, step=step, kind="call")
            recorded = self._call_events(step, call, observed, None, idempotency_key)
            if recorded.evidence_json is None:
                assert recorded.result.failure is not None
                reason = failure_reason(recorded.result.failure)
                self.emit(StepFinished, step=step, status="failed", detail={"reason": reason})
            else:
                detail = {"evidence": recorded.evidence_json["id"]}
                self.emit(StepFinished, step=step, status="ok", detail=detail)
        return recorded

    def model_block(self, step: str, turn: ModelExchange) -> tuple[dict[str, Any], ...]:
        """Record the block of one model turn: its request and response bytes, then ``model_turn``.

        The block is ``evidence_registered`` of each of :meth:`ModelExchange.items`
        (``model_request``, ``model_response``, a framework's ``model_stream``), then
        ``model_turn`` (its detail: :meth:`ModelExchange.event_detail`).

        Returns:
            The request's, the response's and (a framework's stream) the streamed bytes'
            evidence records, as plain JSON.

        Raises:
            OSError: the trace or the evidence cannot be written.

        """
        with self._collecting():
            records = tuple(
                self.register(step, data, media_type, kind, None, {})
                for data, media_type, kind in turn.items()
            )
            self.emit(
                ModelTurn,
                step=step,
                source=turn.source,
                model=turn.model,
                request=records[0]["id"],
                response=records[1]["id"],
                key=turn.key,
                detail=turn.event_detail(records[2]["id"] if len(records) > 2 else None),
            )
        return records

    def model_step(self, step: str, turn: ModelExchange) -> tuple[dict[str, Any], ...]:
        """Record a whole model step: ``step_started`` (``model``), the block, ``step_finished``.

        The step finishes ``ok`` with ``detail.evidence`` = the ids of the block's
        evidence (request, response, streamed bytes), as the executor finishes a frozen
        ``model`` step; returns and raises as :meth:`model_block`. Not committed: call
        :meth:`commit`.
        """
        with self._collecting():
            self.emit(StepStarted, step=step, kind="model")
            records = self.model_block(step, turn)
            detail = {"evidence": [record["id"] for record in records]}
            self.emit(StepFinished, step=step, status="ok", detail=detail)
        return records

    def commit(self) -> None:
        """Make what was recorded since the last commit land, as :attr:`durability` says.

        ``commit``: nothing (the run directory writer syncs at the end); ``group``: one
        write to the OS now, fsync within :data:`SYNC_INTERVAL`; ``each``: write and
        fsync now.

        Raises:
            OSError: the write (or, for ``each``, the fsync) failed, or an earlier
                background fsync did.

        """
        if self.durability == Durability.COMMIT:
            return
        sync = self._sync
        if sync is not None and sync.error is not None:
            raise sync.error
        self.trace.flush()
        if sync is not None:
            sync.mark()
        else:
            self.sync_now()

    def sync_now(self) -> None:
        """Make the trace and the evidence pack durable.

        ``group`` on Linux: one ``syncfs(2)`` of the trace's filesystem (it holds the
        pack too). Otherwise: fsync the pack (when anything was appended since) and the
        trace.

        Raises:
            OSError: the sync failed (it names the run directory or the file).

        """
        sync_run(self.trace, self.store, group=self._sync is not None, closed=self._closed)

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
            self.store.close(sync=sync)  # the pack is on disk before the trace's last fsync
        finally:
            self._closed = True
        return self.trace.close(sync=sync)
