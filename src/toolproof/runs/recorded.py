"""What a recorder takes and gives: a model turn to record, a recorded call block.

:class:`ModelExchange` is one model turn (request and response bytes, the match key,
and for a streamed turn its exact streamed bytes: :func:`stream_detail`,
:func:`stream_chunks`);
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
from toolproof.errors import InputError
from toolproof.identity import canonical_json

__all__ = [
    "STREAM_KIND",
    "STREAM_MEDIA_TYPE",
    "CallRecord",
    "ModelExchange",
    "call_json",
    "failure_reason",
    "returned",
    "stream_chunks",
    "stream_detail",
]

STREAM_KIND = "model_stream"
"""The evidence kind of a framework turn's streamed bytes (its stream events)."""
STREAM_MEDIA_TYPE = "application/jsonl"
"""The media type of a framework turn's streamed bytes: one canonical JSON event a line."""


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


def returned(result: ToolResult, media_type: str) -> ToolResult | dict[str, Any]:
    """``result`` as a ``tool_returned`` event holds it (see ``bundle.trace.event_json``).

    A success whose value has evidence bytes (``media_type`` set by
    :func:`~toolproof.evidence.encoding.encode_value`, ``""`` otherwise) holds plain JSON
    only, so ``result.to_json()`` would be an equal copy: its plain JSON is built as it
    is, without pydantic's serializer. Any other result is returned as the model.
    """
    if not media_type or result.failure is not None:
        return result
    value = result.value
    return {"schema_version": result.schema_version, "ok": True, "value": value, "failure": None}


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
        detail: source-specific plain JSON (HTTP: method, URL, status, kept headers; a
            streamed turn: ``stream``, :func:`stream_detail`).
        stream: a framework's streamed turn: the exact streamed bytes (its stream
            events, one canonical JSON line each), stored as evidence of kind
            :data:`STREAM_KIND`; ``None``: a whole turn, or an HTTP stream (its bytes
            are the response body).

    """

    source: str
    model: str
    request: bytes
    response: bytes
    key: str
    request_media_type: str = "application/json"
    response_media_type: str = "application/json"
    detail: dict[str, Any] = field(default_factory=dict)
    stream: bytes | None = None

    def items(self) -> list[tuple[bytes, str, str]]:
        """The bytes a recorder stores, in block order: ``(data, media type, kind)``.

        The request (``model_request``), the response (``model_response``) and, for a
        framework's stream, the streamed bytes (:data:`STREAM_KIND`).
        """
        items = [
            (self.request, self.request_media_type, "model_request"),
            (self.response, self.response_media_type, "model_response"),
        ]
        if self.stream is not None:
            items.append((self.stream, STREAM_MEDIA_TYPE, STREAM_KIND))
        return items

    def event_detail(self, stream_id: str | None) -> dict[str, Any]:
        """The ``model_turn`` event's detail: :attr:`detail`, plus ``stream.evidence``.

        ``stream_id``: the id of the streamed bytes' evidence (``None``: none, the
        detail as it is).
        """
        if stream_id is None:
            return self.detail
        return {**self.detail, "stream": {**self.detail.get("stream", {}), "evidence": stream_id}}


def stream_detail(chunks: list[bytes]) -> dict[str, Any]:
    """The ``stream`` entry of a streamed turn's detail: ``{"chunks": [size, ...]}``.

    Args:
        chunks: the chunks in the order they arrived, exactly as they arrived.

    Returns:
        ``{"chunks": [len(chunk) for chunk in chunks]}``: the size in bytes of each
        chunk, in order (their sum is the size of the streamed bytes). The recorder adds
        ``"evidence"`` (the id of the streamed bytes) for a framework's stream.

    """
    return {"chunks": [len(chunk) for chunk in chunks]}


def stream_chunks(data: bytes, detail: dict[str, Any]) -> list[bytes] | None:
    """The recorded chunks of a streamed turn: ``data`` cut at the sizes ``detail`` records.

    Args:
        data: the streamed bytes (a framework's ``model_stream`` evidence; HTTP: the
            response body).
        detail: the ``model_turn`` event's detail.

    Returns:
        The chunks, each exactly as recorded, in order; ``None`` for a whole turn (no
        ``stream`` in ``detail``).

    Raises:
        InputError: ``detail.stream.chunks`` is not a list of sizes (integers >= 0)
            adding up to ``len(data)``.

    """
    stream = detail.get("stream")
    if stream is None:
        return None
    sizes = stream.get("chunks") if isinstance(stream, dict) else None
    if (
        not isinstance(sizes, list)
        or not all(type(size) is int and size >= 0 for size in sizes)
        or sum(sizes) != len(data)
    ):
        raise InputError(
            f"a streamed model turn's detail.stream.chunks must be the sizes of its chunks "
            f"(integers >= 0) adding up to its {len(data)} streamed bytes; it is {sizes!r}",
            rule="stream chunks",
        )
    chunks, at = [], 0
    for size in sizes:
        chunks.append(data[at : at + size])
        at += size
    return chunks


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
