"""What a recorder takes and gives: a model turn to record, a recorded call block.

:class:`ModelExchange` is one model turn (request and response bytes, the match key);
:class:`CallRecord` is what :meth:`~toolproof.runs.recorder.Recorder.call_block`
returns; :func:`call_json` is the one builder of a call's plain JSON and id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.identity import canonical_json

__all__ = ["CallRecord", "ModelExchange", "call_json", "failure_reason"]


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
        if self.evidence_json is None:
            return None
        return EvidenceRecord.model_validate(self.evidence_json)
