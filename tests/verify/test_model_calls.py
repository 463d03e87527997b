"""The tool-call ids a recorded model response holds, and the check of a call's model link."""

from __future__ import annotations

import json
from typing import Any

from toolproof.contract.evidence import EvidenceRecord, evidence_id_for, evidence_path_for
from toolproof.contract.tools import ToolCall
from toolproof.contract.trace import EvidenceRegistered, ModelTurn, ToolCalled, TraceEvent
from toolproof.identity import digest
from toolproof.verify.model_calls import check_model_links, model_call_ids

PYDANTIC_AI = {
    "parts": [
        {"part_kind": "text", "content": "Looking."},
        {"part_kind": "tool-call", "tool_name": "capital", "tool_call_id": "pyd_ai_0e73"},
        {"part_kind": "tool-call", "tool_name": "capital", "tool_call_id": "pyd_ai_77aa"},
    ]
}
AGENTS = {
    "output": [
        {"type": "reasoning", "id": "rs_1"},
        {"type": "function_call", "call_id": "call_AbC", "id": "fc_1", "name": "capital"},
    ]
}
CHAT = {"choices": [{"message": {"tool_calls": [{"id": "call_Q7", "type": "function"}]}}]}
ANTHROPIC = {"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "id": "toolu_01"}]}


def _bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_each_recorder_shape_gives_its_ids_in_order() -> None:
    assert model_call_ids("pydantic-ai", _bytes(PYDANTIC_AI)) == ["pyd_ai_0e73", "pyd_ai_77aa"]
    assert model_call_ids("openai-agents", _bytes(AGENTS)) == ["call_AbC"]
    assert model_call_ids("http", _bytes(CHAT)) == ["call_Q7"]
    assert model_call_ids("http", _bytes(AGENTS)) == ["call_AbC"]  # the Responses API
    assert model_call_ids("http", _bytes(ANTHROPIC)) == ["toolu_01"]


def test_a_streamed_body_gives_the_ids_of_its_chunks_once() -> None:
    first = {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_S1"}]}}]}
    rest = {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}
    stream = b"data: " + _bytes(first) + b"\n\ndata: " + _bytes(rest) + b"\n\ndata: [DONE]\n\n"
    assert model_call_ids("http", stream) == ["call_S1"]


def test_a_response_without_calls_or_unreadable_gives_none() -> None:
    assert model_call_ids("pydantic-ai", _bytes({"parts": [{"part_kind": "text"}]})) == []
    assert model_call_ids("http", b"not json") == []
    assert model_call_ids("http", _bytes([1, 2])) == []
    assert model_call_ids("other", _bytes(PYDANTIC_AI)) == []


def _run(model_call_id: str | None, model_turn: str | None) -> list[TraceEvent]:
    response = _bytes(PYDANTIC_AI)
    evidence_id = evidence_id_for(digest(response))
    record = EvidenceRecord(
        id=evidence_id,
        digest=digest(response),
        size=len(response),
        media_type="application/json",
        path=evidence_path_for(evidence_id),
        source={"kind": "model_response", "step": "turn-00000001"},
    )
    call = ToolCall(tool="capital", arguments={"country": "Norway"}, step="call-00000001")
    return [
        EvidenceRegistered(idx=0, step="turn-00000001", evidence=record),
        ModelTurn(
            idx=1,
            step="turn-00000001",
            source="pydantic-ai",
            model="function",
            request=record.id,
            response=record.id,
            key="sha256:" + "0" * 64,
        ),
        ToolCalled(
            idx=2,
            step="call-00000001",
            call_id=call.id,
            call=call,
            model_call_id=model_call_id,
            model_turn=model_turn,
        ),
    ]


def _read(key: str) -> bytes | None:
    response = _bytes(PYDANTIC_AI)
    return response if key == evidence_id_for(digest(response)) else None


def test_a_call_linked_to_the_turn_that_asked_for_it_passes() -> None:
    assert check_model_links(_run("pyd_ai_77aa", "turn-00000001"), _read) == []
    assert check_model_links(_run("anything", None), _read) == []  # no turn named: no link


def test_a_link_the_turns_response_does_not_hold_is_named() -> None:
    assert check_model_links(_run("pyd_ai_ffff", "turn-00000001"), _read) == [
        (
            2,
            "the call says model turn 'turn-00000001' asked for it as 'pyd_ai_ffff', but that "
            "turn's recorded response asks for tool call ids: pyd_ai_0e73, pyd_ai_77aa",
        )
    ]


def test_a_turn_not_recorded_before_the_call_is_named() -> None:
    assert check_model_links(_run("pyd_ai_0e73", "turn-00000002"), _read) == [
        (
            2,
            "the call names model turn 'turn-00000002', which is not a model_turn recorded "
            "before it",
        )
    ]
    assert check_model_links(_run(None, "turn-00000001"), _read) == [
        (2, "the call names model turn 'turn-00000001' but no model_call_id")
    ]


def test_an_unlinked_call_event_writes_no_link_fields() -> None:
    event = _run(None, None)[2]
    assert isinstance(event, ToolCalled)
    assert "model_call_id" not in event.to_json()
    assert "model_turn" not in event.to_json()
    assert event.model_copy(update={"model_call_id": "x"}).to_json()["model_call_id"] == "x"
