from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset, remanifest, run

from toolproof.bundle.trace import TraceLine
from toolproof.contract.tools import ToolCall, ToolResult
from toolproof.contract.trace import ToolCalled, ToolReturned
from toolproof.errors import ReplayRefused
from toolproof.identity import canonical_json, digest
from toolproof.runs.calls import FrozenCalls
from toolproof.runs.replay import ReplayResult, replay_run
from toolproof.runs.traceindex import TraceIndex


def _replay(run_dir: Path, counter: Counter, **kwargs: object) -> ReplayResult:
    toolset = make_toolset(counter, **{k: v for k, v in kwargs.items() if k == "description"})  # type: ignore[arg-type]
    lenient = bool(kwargs.get("lenient", False))
    return asyncio.run(replay_run(run_dir, toolset=toolset.descriptor(), lenient=lenient))


def test_replay_is_identical_and_calls_nothing(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    counter = Counter()
    result = _replay(outcome.path, counter)
    assert result.identical and result.report_matches
    assert result.first_difference is None
    assert result.events == len((outcome.path / "trace.jsonl").read_bytes().splitlines())
    assert (counter.calls, result.live_calls) == (0, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # scratch removed


def test_replay_of_failed_and_budget_stopped_runs_is_identical(tmp_path: Path) -> None:
    raw = base_spec(budgets={"tool_calls": 1})
    raw["steps"][0]["arguments"] = {"item": "pear"}
    outcome = run(tmp_path, raw, make_toolset(Counter()))
    assert outcome.outcome.stopped  # pear failed, then the plums call hit the budget
    assert [f["reason"][:11] for f in outcome.outcome.failures] == [
        "tool_error:",
        "tool-call b",
        "tool-call b",
    ]
    assert _replay(outcome.path, Counter()).identical


def test_replay_reproduces_a_wall_clock_stop(tmp_path: Path) -> None:
    spec = base_spec(
        steps=[
            {"id": "nap", "tool": "slow", "arguments": {"seconds": 30}},
            {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
        ],
        reasoner={},
        budgets={"wall_seconds": 0.3},
    )
    outcome = run(tmp_path, spec, make_toolset(Counter()))
    counter = Counter()
    result = _replay(outcome.path, counter)
    assert result.identical
    assert counter.calls == 0


def test_tampered_file_refuses_before_any_call(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    claims = outcome.path / "claims.json"
    claims.write_bytes(claims.read_bytes().replace(b"12", b"13"))
    counter = Counter()
    with pytest.raises(ReplayRefused) as info:
        _replay(outcome.path, counter)
    assert info.value.fields["check"] == "manifest"
    assert info.value.fields["file"] == "claims.json"
    assert info.value.message.startswith(
        "frozen replay refused: [manifest] claims.json: claims.json has digest sha256:"
    )
    assert counter.calls == 0


def test_changed_runtime_descriptor_refuses_naming_the_tool(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    counter = Counter()
    with pytest.raises(ReplayRefused) as info:
        _replay(outcome.path, counter, description="Stock, v2.")
    change = (
        r"the runtime descriptor changed: changed stock \(fingerprint sha256:[0-9a-f]{64} -> "
        r"sha256:[0-9a-f]{64} \(its spec changed: description, schemas or annotations\)\)"
    )
    assert re.fullmatch("frozen replay refused: " + change, info.value.message)
    assert info.value.fields["changed"] == ["stock"]
    lenient = _replay(outcome.path, counter, description="Stock, v2.", lenient=True)
    assert len(lenient.differences) == 1
    assert re.fullmatch(change, lenient.differences[0])
    assert lenient.identical
    assert counter.calls == 0


def _edit_spec(run_dir: Path, edit: object) -> Path:
    spec = json.loads((run_dir / "spec.json").read_bytes())
    edit(spec)  # type: ignore[operator]
    (run_dir / "spec.json").write_bytes(canonical_json(spec))
    return remanifest(run_dir)


def test_changed_plan_refuses(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    edited = _edit_spec(outcome.path, lambda s: s.update(task="Something else."))
    with pytest.raises(ReplayRefused, match=r"^frozen replay refused: the plan changed: recorded "):
        _replay(edited, Counter())


def test_changed_arguments_are_refused_or_reported_when_lenient(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    edited = _edit_spec(outcome.path, lambda s: s["steps"][0]["arguments"].update(item="plum"))
    counter = Counter()
    with pytest.raises(ReplayRefused, match="the plan changed"):
        _replay(edited, counter)
    result = _replay(edited, counter, lenient=True)
    assert not result.identical
    assert result.differences[0].startswith("the plan changed: recorded plan_")
    assert (
        "step 'apples' calls 'stock' with changed arguments {'item': 'plum'}"
        in (result.differences[1])
    )
    assert result.first_difference is not None
    assert result.first_difference["idx"] == 1
    assert result.first_difference["fields"] == ["call", "call_id"]
    assert counter.calls == 0


def _recorded(tmp_path: Path) -> FrozenCalls:
    """A call of step ``apples`` recorded in a trace file, served from its index."""
    call = ToolCall(tool="stock", arguments={"item": "apple"}, step="apples")
    events = [
        ToolCalled(idx=0, step="apples", call_id=call.id, call=call),
        ToolReturned(idx=1, step="apples", call_id=call.id, result=ToolResult.success(1)),
    ]
    path = tmp_path / "trace.jsonl"
    recording = TraceIndex(path)
    offset = 0
    with path.open("wb") as trace:
        for position, event in enumerate(events):
            line = canonical_json(event.to_json())
            trace.write(line + b"\n")
            recording.add(TraceLine(position, digest(line), event, None, offset))
            offset += len(line) + 1
    return FrozenCalls(recording)


def test_frozen_calls_serve_recorded_results_by_call_id(tmp_path: Path) -> None:
    call = ToolCall(tool="stock", arguments={"item": "apple"}, step="apples")
    observed = asyncio.run(_recorded(tmp_path).call(call, None))
    assert (observed.result.ok, observed.result.value, observed.failures) == (True, 1, ())


def test_frozen_calls_refuse_changed_arguments(tmp_path: Path) -> None:
    call = ToolCall(tool="stock", arguments={"item": "plum"}, step="apples")
    with pytest.raises(ReplayRefused) as info:
        asyncio.run(_recorded(tmp_path).call(call, None))
    assert info.value.fields["rule"] == (
        "step 'apples' calls 'stock' with changed arguments {'item': 'plum'} "
        "(recorded {'item': 'apple'})"
    )


def test_frozen_calls_refuse_an_unrecorded_step(tmp_path: Path) -> None:
    call = ToolCall(tool="stock", arguments={}, step="other")
    with pytest.raises(ReplayRefused, match="step 'other' made no tool call in the recorded run"):
        asyncio.run(_recorded(tmp_path).call(call, None))
