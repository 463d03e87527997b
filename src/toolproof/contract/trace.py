"""Trace events: a discriminated union (on ``type``), hash-chained by ``prev``.

Every event has ``idx`` (its position in ``trace.jsonl``, from 0) and ``prev``: the
digest (``sha256:<hex>``) of the canonical JSON of the event before it, ``None`` for
the first. The canonical JSON of an event is exactly its line in ``trace.jsonl``
(without its newline), so the chain is checked by hashing lines.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from toolproof.contract.base import CanonicalModel
from toolproof.contract.evidence import Claim, EvidenceRecord
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult

__all__ = [
    "TRACE_EVENT_ADAPTER",
    "ApprovalDecided",
    "ApprovalRequested",
    "ApprovalSkipped",
    "ClaimEmitted",
    "EventBase",
    "EvidenceRegistered",
    "FailureObserved",
    "ModelTurn",
    "PolicyDecided",
    "PromptGot",
    "RequestRelayed",
    "ResourceRead",
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

    OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the event's JSON while ``None`` (added after events of the
    kind were first written, so an event without them keeps its bytes)."""

    idx: int = Field(ge=0)
    prev: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    step: str


class StepStarted(EventBase):
    """A plan node started."""

    type: Literal["step_started"] = "step_started"
    kind: str


class ToolCalled(EventBase):
    """A tool call was made; ``call_id`` is the content id of ``call``.

    Attributes:
        call_id: the content id of ``call`` (toolproof's id of the call).
        call: the call made (tool, arguments, step).
        idempotency_key: the call's key (``idem_<64 hex>``,
            :mod:`toolproof.tools.idempotency`) when it had one (a recording session's
            call).
        model_call_id: the id the agent's model gave the call (pydantic-ai's
            ``tool_call_id``, the Agents SDK's ``call_id``, LangChain's ``ToolCall["id"]``,
            an OpenAI-compatible ``tool_calls[].id``), when the framework said it; the
            id an answer may cite the call by.
        model_turn: the step (``turn-0000000N``) of the recorded model turn whose
            response asked for this call (holds ``model_call_id``), when one was recorded.

    The last three are kept outside ``call`` so the call's content id does not depend on
    them, and are absent from the JSON while ``None`` (traces written before they existed
    read and hash as they always did).
    """

    OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = (
        "idempotency_key",
        "model_call_id",
        "model_turn",
    )

    type: Literal["tool_called"] = "tool_called"
    call_id: str
    call: ToolCall
    idempotency_key: str | None = Field(default=None, pattern=r"^idem_[0-9a-f]{64}$")
    model_call_id: str | None = Field(default=None, min_length=1)
    model_turn: str | None = Field(default=None, min_length=1)

    @model_serializer(mode="wrap")
    def _omit_absent_key(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.OMITTED_WHEN_NONE:
            if data.get(name, "") is None:
                del data[name]
        return data


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


class ModelTurn(EventBase):
    """One model request and its response, both stored exactly as evidence (a ``model`` step).

    Recorded by the session's model recorders (``session.pydantic_ai_model``,
    ``session.openai_agents_model``, ``session.httpx_transport``) right after the
    ``evidence_registered`` events of its bytes (two; three for a framework's stream).
    Secrets never appear: HTTP headers are kept only when allow-listed (docs/agents.md).

    Attributes:
        source: who recorded it: ``pydantic-ai``, ``openai-agents`` or ``http``.
        model: the model as the framework names it (``http``: ``"POST <url>"``).
        request: the evidence id of the request bytes (the framework's request objects
            as canonical JSON; ``http``: the request body).
        response: the evidence id of the response bytes (``http``: the response body).
        key: ``sha256:<hex>`` of the match key: the canonical request's normal form
            (:mod:`toolproof.runs.normal_form`; ``http``: method, URL and body), which
            frozen replay matches on.
        detail: ``http``: ``method``, ``url`` (secret query values redacted), ``status``
            and the allow-listed ``request_headers`` / ``response_headers``;
            ``pydantic-ai`` and ``openai-agents``: ``framework`` and ``version`` (the
            installed distribution, absent from turns recorded before). A streamed turn
            also has ``stream``: ``chunks``, the size in bytes of each chunk in the
            order it arrived, and for a framework ``evidence``, the id of its streamed
            bytes (kind ``model_stream``, registered before this event; HTTP: the
            response body is the stream).

    """

    type: Literal["model_turn"] = "model_turn"
    source: str
    model: str
    request: str
    response: str
    key: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    detail: dict[str, JsonValue] = Field(default_factory=dict)


class ResourceRead(EventBase):
    """An MCP resource was read (``resources/read``) and answered.

    Its contents follow as ``evidence_registered`` events, one per content item
    (kind ``resource``): a text item's UTF-8 bytes, a blob item's decoded bytes.

    Attributes:
        uri: the URI read.
        result: the ``ReadResourceResult`` as answered (MCP wire form).

    """

    type: Literal["resource_read"] = "resource_read"
    uri: str
    result: dict[str, JsonValue]


class PromptGot(EventBase):
    """An MCP prompt was fetched (``prompts/get``) and answered.

    Its messages follow as one ``evidence_registered`` event (kind ``prompt``): the
    canonical JSON of ``result``.

    Attributes:
        name: the prompt's name (as served).
        arguments: the arguments sent.
        result: the ``GetPromptResult`` as answered (MCP wire form).

    """

    type: Literal["prompt_got"] = "prompt_got"
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    result: dict[str, JsonValue]


class RequestRelayed(EventBase):
    """A request a tool sent its caller during a call: sampling or elicitation.

    Recorded in the call block after ``tool_returned`` (and ``failure_observed``);
    followed by ``evidence_registered`` of the request's canonical JSON (kind
    ``relayed_request``) and, when the client answered, of the answer's (kind
    ``relayed_answer``).

    Attributes:
        call_id: the call during which it was sent.
        method: ``sampling/createMessage`` or ``elicitation/create``.
        request: its params (MCP wire form).
        answer: the client's result (wire form), or ``None`` when it failed.
        error: why it failed (``"<kind>: <message>"``), or ``""``.

    """

    type: Literal["request_relayed"] = "request_relayed"
    call_id: str
    method: str
    request: dict[str, JsonValue]
    answer: dict[str, JsonValue] | None = None
    error: str = ""


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


class ApprovalRequested(EventBase):
    """A gated call asked a person before anything ran (the ``approve`` wrapper).

    Written in the call's block, before its ``tool_called`` (DESIGN §13).

    Attributes:
        call_id: the call of the block (the content id of its ``ToolCall``).
        request: the request id in the approvals store (``apr_<32 hex>``), the
            ``approval_handle`` of a deferred call.
        tool: the gated variant (``<tool>_approve``).
        fingerprint: that variant's descriptor fingerprint (``sha256:...``).
        arguments_digest: ``sha256:...`` of the canonical JSON (RFC 8785) of the
            arguments the gate received.
        rule: the ``[[approvals.rules]]`` entry that matched (with its ``index``), or
            ``None`` when no rules are configured (every call is gated).
        mode: ``wait`` or ``defer``.
        policy: the variant's validated ``approve`` config (``{"store",
            "timeout_seconds", "mode", "rules"}``, as ``ApprovalPolicy`` dumps it to
            JSON); its RFC 8785 digest is the ``config_digest`` of the variant's
            ``approve`` layer in runtime.json, so the rules the check re-evaluates are
            bound to the descriptor (``None`` only in traces written before it was
            recorded; the ``approvals`` check refuses that for a gated variant).

    """

    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    request: str
    tool: str
    fingerprint: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    arguments_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    rule: dict[str, JsonValue] | None = None
    mode: Literal["wait", "defer"] = "wait"
    policy: dict[str, JsonValue] | None = None


class ApprovalSkipped(EventBase):
    """A call of an ``approve`` variant that no rule gated ran without asking anyone.

    Written in the call's block, before its ``tool_called``, so that every call of a
    gated variant carries an approval record: the ``approvals`` check re-evaluates
    ``rules`` on the call's recorded arguments (a forger who removed a gated call's
    ``approval_requested`` / ``approval_decided`` leaves a call with no record, or a
    skip whose rules match, and ``verify`` fails naming it).

    Attributes:
        call_id: the call of the block.
        tool: the gated variant (``<tool>_approve``).
        rules: the ``[[approvals.rules]]`` entries whose ``when`` holds for the tool
            (each ``{"index", "when", "arguments"}``, as ``approval_requested`` records
            a rule), none of whose ``arguments`` predicates held; ``[]`` when no rule's
            ``when`` holds for the tool.
        policy: the variant's validated ``approve`` config, as in
            :class:`ApprovalRequested` (its digest is the layer's ``config_digest``).

    """

    type: Literal["approval_skipped"] = "approval_skipped"
    call_id: str
    tool: str
    rules: list[dict[str, JsonValue]] = Field(default_factory=list)
    policy: dict[str, JsonValue] | None = None


class PolicyDecided(EventBase):
    """The ``[policy]`` Cedar decision on a call, first in its block (docs/policy.md).

    Written after the arguments validated and before any approval event and the
    call's ``tool_called``; a denied call's body never ran (its result is a
    ``denied_by_policy`` failure). The ``policy`` check re-evaluates ``request`` with
    the policy set ``runtime.json`` records and compares.

    Attributes:
        call_id: the call of the block.
        digest: the policy set's digest (the Toolset descriptor's ``policy.digest``).
        decision: ``allow`` or ``deny``.
        determining: the determining policies' ids, sorted.
        errors: Cedar's evaluation errors (an erroring policy counts for nothing).
        approval_required: an allow whose determining permits include one annotated
            ``@approval("required")`` (the call must carry an approving decision).
        request: ``{"principal", "tool", "attributes", "context"}`` as evaluated.

    """

    type: Literal["policy_decided"] = "policy_decided"
    call_id: str
    digest: str
    decision: Literal["allow", "deny"]
    determining: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    approval_required: bool = False
    request: dict[str, JsonValue]


class ApprovalDecided(EventBase):
    """The decision on an approval request, written before the call's ``tool_called``.

    Attributes:
        call_id: the call of the block.
        request: the request decided (as in ``approval_requested``).
        decision: ``approve``, ``deny`` or ``approve_with_edits``.
        who: who decided: the callback's qualified name, the OS user (CLI), the token
            name (HTTP), or ``toolproof`` when it failed closed (timeout, store).
        channel: ``callback``, ``cli``, ``http`` or ``fail-closed``.
        decided_at: when (ISO 8601 UTC).
        reason: the reason given (or why it failed closed), ``""`` when none.
        approved_digest: ``sha256:...`` of the canonical JSON of the arguments the body
            ran with; ``None`` for a denial.
        edited_arguments: the arguments a person substituted (``approve_with_edits``),
            else ``None``; their digest is ``approved_digest``.

    """

    type: Literal["approval_decided"] = "approval_decided"
    call_id: str
    request: str
    decision: Literal["approve", "deny", "approve_with_edits"]
    who: str
    channel: str
    decided_at: str
    reason: str = ""
    approved_digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    edited_arguments: dict[str, JsonValue] | None = None


TraceEvent = Annotated[
    StepStarted
    | ToolCalled
    | ToolReturned
    | EvidenceRegistered
    | ClaimEmitted
    | StepFinished
    | FailureObserved
    | ModelTurn
    | RunFailed
    | ApprovalRequested
    | ApprovalDecided
    | ApprovalSkipped
    | PolicyDecided
    | ResourceRead
    | PromptGot
    | RequestRelayed,
    Field(discriminator="type"),
]
"""Any trace event, discriminated on ``type``."""

TRACE_EVENT_ADAPTER: TypeAdapter[TraceEvent] = TypeAdapter(TraceEvent)
"""Parses one trace line (``TRACE_EVENT_ADAPTER.validate_json(line)``)."""
