"""Trace events: a discriminated union (on ``type``), hash-chained by ``prev``.

Every event has ``idx`` (its position in ``trace.jsonl``, from 0) and ``prev``: the
digest (``sha256:<hex>``) of the canonical JSON of the event before it, ``None`` for
the first. The canonical JSON of an event is exactly its line in ``trace.jsonl``
(without its newline), so the chain is checked by hashing lines.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, TypeAdapter

from toolproof.contract.base import CanonicalModel
from toolproof.contract.evidence import Claim, EvidenceRecord
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult

__all__ = [
    "TRACE_EVENT_ADAPTER",
    "ClaimEmitted",
    "EventBase",
    "EvidenceRegistered",
    "FailureObserved",
    "RunFailed",
    "StepFinished",
    "StepStarted",
    "ToolCalled",
    "ToolReturned",
    "TraceEvent",
]


class EventBase(CanonicalModel):
    """Fields every trace event has.

    Attributes:
        idx: the event's position in the trace, from 0.
        prev: ``sha256:<hex>`` of the previous event's canonical JSON (``None`` at idx 0).
        step: the plan node the event belongs to.

    """

    idx: int = Field(ge=0)
    prev: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    step: str


class StepStarted(EventBase):
    """A plan node started."""

    type: Literal["step_started"] = "step_started"
    kind: str


class ToolCalled(EventBase):
    """A tool call was made; ``call_id`` is the content id of ``call``."""

    type: Literal["tool_called"] = "tool_called"
    call_id: str
    call: ToolCall


class ToolReturned(EventBase):
    """A tool call returned (a value or a normalized failure)."""

    type: Literal["tool_returned"] = "tool_returned"
    call_id: str
    result: ToolResult


class EvidenceRegistered(EventBase):
    """Evidence bytes were stored under ``evidence/``."""

    type: Literal["evidence_registered"] = "evidence_registered"
    evidence: EvidenceRecord


class ClaimEmitted(EventBase):
    """The reasoner emitted a claim."""

    type: Literal["claim_emitted"] = "claim_emitted"
    claim: Claim


class StepFinished(EventBase):
    """A plan node finished.

    Attributes:
        status: ``ok``, ``failed`` (a tool failure or a bad reference) or ``skipped``
            (a dependency did not finish ok).
        detail: what happened (``reason``, counts).

    """

    type: Literal["step_finished"] = "step_finished"
    status: Literal["ok", "failed", "skipped"]
    detail: dict[str, JsonValue] = Field(default_factory=dict)


class FailureObserved(EventBase):
    """A failure some layer of a called tool reported, though the call's result differs.

    The runtime records every failure it saw during a call (an extension layer, a
    backend, a nested tool), right after ``tool_returned``; the ``failure-honesty``
    check compares them with what the call returned.

    Attributes:
        call_id: the call during which the failure was seen.
        failure: the failure, as the layer reported it.
        recovered_by: the layer that declared it handled the failure (``retry`` ran
            the call again), or ``""``.

    """

    type: Literal["failure_observed"] = "failure_observed"
    call_id: str
    failure: ToolFailure
    recovered_by: str = ""


class RunFailed(EventBase):
    """The run stopped early.

    Attributes:
        reason: ``budget`` (a budget was exceeded) or ``error``.
        message: what happened, naming the limit or the failure.
        detail: e.g. ``budget`` (``wall_seconds``/``evidence_bytes``/``tool_calls``),
            ``limit`` and ``used``.

    """

    type: Literal["run_failed"] = "run_failed"
    reason: str
    message: str
    detail: dict[str, JsonValue] = Field(default_factory=dict)


TraceEvent = Annotated[
    StepStarted
    | ToolCalled
    | ToolReturned
    | EvidenceRegistered
    | ClaimEmitted
    | StepFinished
    | FailureObserved
    | RunFailed,
    Field(discriminator="type"),
]
"""Any trace event, discriminated on ``type``."""

TRACE_EVENT_ADAPTER: TypeAdapter[TraceEvent] = TypeAdapter(TraceEvent)
"""Parses one trace line (``TRACE_EVENT_ADAPTER.validate_json(line)``)."""
