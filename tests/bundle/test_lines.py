"""Spliced trace lines: byte for byte the validated models' canonical JSON, for any values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproof.bundle.lines import LineShape, encode_field, prev_json
from toolproof.bundle.trace import TraceWriter, read_trace
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    FailureObserved,
    ModelTurn,
    PromptGot,
    RequestRelayed,
    ResourceRead,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import CanonicalizationError
from toolproof.identity import canonical_json
from toolproof.runs.recorder import Durability, Recorder, call_bytes, call_json

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
"""Any Unicode text without lone surrogates (controls, quotes, astral characters...)."""
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # past 2**53: exact digits
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
OBJECTS = st.dictionaries(TEXT, VALUES, max_size=5)
DIGEST = st.from_regex(r"\Asha256:[0-9a-f]{64}\Z")


@st.composite
def events(draw: st.DrawFn) -> tuple[type[Any], dict[str, Any]]:
    """One event class and fields for it (random values wherever the model allows them)."""
    step = draw(TEXT)
    failure = ToolFailure(kind=draw(TEXT), message=draw(TEXT), retryable=draw(st.booleans()))
    choices: list[tuple[type[Any], dict[str, Any]]] = [
        (StepStarted, {"step": step, "kind": draw(TEXT)}),
        (StepFinished, {"step": step, "status": "failed", "detail": draw(OBJECTS)}),
        (RunFailed, {"step": step, "reason": draw(TEXT), "message": draw(TEXT)}),
        (
            ToolReturned,
            {"step": step, "call_id": draw(TEXT), "result": ToolResult.success(draw(VALUES))},
        ),
        (
            ToolReturned,
            {"step": step, "call_id": draw(TEXT), "result": ToolResult(ok=False, failure=failure)},
        ),
        (
            FailureObserved,
            {"step": step, "call_id": draw(TEXT), "failure": failure, "recovered_by": draw(TEXT)},
        ),
        (
            ModelTurn,
            {
                "step": step,
                "source": draw(TEXT),
                "model": draw(TEXT),
                "request": draw(TEXT),
                "response": draw(TEXT),
                "key": draw(DIGEST),
                "detail": draw(OBJECTS),
            },
        ),
        (ResourceRead, {"step": step, "uri": draw(TEXT), "result": draw(OBJECTS)}),
        (
            PromptGot,
            {"step": step, "name": draw(TEXT), "arguments": draw(OBJECTS), "result": draw(OBJECTS)},
        ),
        (
            RequestRelayed,
            {
                "step": step,
                "call_id": draw(TEXT),
                "method": draw(TEXT),
                "request": draw(OBJECTS),
                "answer": draw(st.none() | OBJECTS),
            },
        ),
    ]
    return draw(st.sampled_from(choices))


@settings(max_examples=100, deadline=None)
@given(st.lists(events(), min_size=1, max_size=4))
def test_spliced_lines_are_the_models_lines_for_any_field_values(
    tmp_path_factory: pytest.TempPathFactory, drawn: list[tuple[type[Any], dict[str, Any]]]
) -> None:
    tmp = tmp_path_factory.mktemp("lines")
    checked = TraceWriter(tmp / "model.jsonl")
    recorder = Recorder(tmp)
    for cls, fields in drawn:
        checked.emit(cls, **fields)
        recorder.emit(cls, **fields)
    checked.close(sync=False)
    recorder.close(sync=False)
    fast = (tmp / "trace.jsonl").read_bytes()
    assert fast == (tmp / "model.jsonl").read_bytes()


@settings(max_examples=200, deadline=None)
@given(tool=TEXT, arguments=OBJECTS, step=TEXT)
def test_a_spliced_call_is_the_models_call(tool: str, arguments: dict[str, Any], step: str) -> None:
    call_id, data = call_bytes(tool, canonical_json(arguments), step)
    model = ToolCall(tool=tool, arguments=arguments, step=step)
    assert call_id == model.id == call_json(tool, arguments, step)["id"]
    assert data == canonical_json(model.to_json())


@settings(max_examples=60, deadline=None)
@given(arguments=OBJECTS, value=VALUES, failed=st.booleans(), retried=st.booleans())
def test_a_call_step_holds_exactly_what_was_called_and_returned(
    tmp_path_factory: pytest.TempPathFactory,
    arguments: dict[str, Any],
    value: Any,
    failed: bool,
    retried: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("step")
    recorder = Recorder(tmp, durability=Durability.GROUP)
    call = call_json("t", arguments, "call-00000001")
    failure = ToolFailure(kind="tool_error", message='é\u2028"', retryable=True)
    result = ToolResult(ok=False, failure=failure) if failed else ToolResult.success(value)
    observed = [(failure, "retry")] if retried else []
    _, encoded = call_bytes("t", canonical_json(arguments), "call-00000001")
    recorder.call_step("call-00000001", call, result, observed, encoded_call=encoded)
    recorder.commit()
    recorder.close(sync=False)
    lines, problem = read_trace((tmp / "trace.jsonl").read_bytes())
    assert problem is None and [line.problem for line in lines] == [None] * len(lines)
    kinds = [line.event.type for line in lines if line.event is not None]
    middle = ["failure_observed"] * retried + ([] if failed else ["evidence_registered"])
    assert kinds == ["step_started", "tool_called", "tool_returned", *middle, "step_finished"]
    called, returned = lines[1].event, lines[2].event
    assert isinstance(called, ToolCalled) and isinstance(returned, ToolReturned)
    model = ToolCall(tool="t", arguments=arguments, step="call-00000001")  # 1.0 reads back 1
    assert canonical_json(called.call.to_json()) == canonical_json(model.to_json())
    assert called.call_id == called.call.id == returned.call_id
    assert canonical_json(returned.result.to_json()) == canonical_json(result.to_json())


def test_a_lone_surrogate_is_refused_as_the_model_path_refuses_it(tmp_path: Path) -> None:
    checked = TraceWriter(tmp_path / "model.jsonl")
    with pytest.raises(CanonicalizationError, match=r"lone surrogate"):
        checked.emit(StepStarted, step="s\ud800", kind="call")
    checked.close(sync=False)
    recorder = Recorder(tmp_path)
    with pytest.raises(CanonicalizationError, match=r"lone surrogate"):
        recorder.emit(StepStarted, step="s\ud800", kind="call")
    with pytest.raises(CanonicalizationError, match=r"\$\.x: .*lone surrogate"):
        recorder.emit(StepFinished, step="s", status="ok", detail={"x": "\udfff"})
    recorder.emit(StepStarted, step="s", kind="call")  # nothing was written before
    recorder.close(sync=False)
    line = (tmp_path / "trace.jsonl").read_bytes()
    assert json.loads(line)["idx"] == 0


def test_a_shape_names_unknown_and_missing_fields() -> None:
    with pytest.raises(TypeError, match=r"StepStarted: not fields to give: \['nope'\]"):
        LineShape(StepStarted, ("step", "nope"))
    with pytest.raises(TypeError, match=r"StepStarted: field 'kind' is required"):
        LineShape(StepStarted, ("step",))
    shape = LineShape(StepStarted, ("step",), {"kind": "call"})
    slots = {b"idx": b"3", b"prev": prev_json(None), b"step": encode_field("a%b")}
    assert shape.line(slots) == canonical_json(
        StepStarted(idx=3, step="a%b", kind="call").to_json()
    )
