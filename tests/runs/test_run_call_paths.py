"""The executor's fast paths for ``call`` steps write exactly what its general path writes.

A ``call`` node of a run with no progress callback and no evidence budget is recorded in
one go by ``Recorder.call_step`` (``step_started`` after the call, with the block); flat
scalar arguments skip reference resolution and the encode-and-parse copy. Progress
callbacks (``on_event``) force the general path, so the two are compared byte for byte.
Both record a call from its bytes encoded before the call, whatever its body does to
its arguments.
"""

from __future__ import annotations

import asyncio
import enum
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runs_support import Counter, base_spec, make_toolset

from toolproof import Tool, Toolset
from toolproof.contract.runs import ReasonerSpec, RunSpec
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import TraceEvent
from toolproof.errors import CanonicalizationError
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.identity import canonical_json
from toolproof.runs.calls import LiveCalls, LiveClock
from toolproof.runs.executor import Executor, _call_of, _scalar_copy
from toolproof.runs.planner import plan_run
from toolproof.runs.recorder import Recorder, call_json
from toolproof.runs.run import RunOutcome, execute_run
from toolproof.tools.observe import note_approval, note_failure
from toolproof.verify.verifier import verify_run


class _Colour(enum.StrEnum):
    RED = "red"


class _Dict(dict[str, Any]):
    pass


@pytest.mark.parametrize(
    "arguments",
    [
        {"n": 1},
        {},
        {"b": True, "a": None, "c": "é\u2028\U0001f600", "B": 2**70, "_": -0, "z": False},
        {"item": "apple", "count": 9007199254740993},
    ],
)
def test_scalar_copy_is_the_parsed_back_canonical_json(arguments: dict[str, Any]) -> None:
    parsed = json.loads(canonical_json(arguments))
    copied = _scalar_copy(arguments)
    assert copied == parsed
    assert copied is not arguments
    assert list(copied) == list(parsed)  # the same (canonical) key order
    assert [type(value) for value in copied.values()] == [type(v) for v in parsed.values()]


@pytest.mark.parametrize(
    "arguments",
    [
        {"x": 1.0},  # parsed back as the int 1
        {"x": 1e20},
        {"x": [1]},
        {"x": {"$ref": "steps.a.value"}},
        {"é": 1},  # a non-ASCII key: the canonical order is by UTF-16 code units
        {1: 2},
        {"x": _Colour.RED},
        _Dict(x=1),
        ["x"],
        None,
    ],
)
def test_scalar_copy_refuses_what_a_round_trip_could_change(arguments: Any) -> None:
    assert _scalar_copy(arguments) is None


ITEMS = {"items": [{"$ref": "steps.apples.value.item"}]}


def _spec(**overrides: Any) -> dict[str, Any]:
    steps = [
        {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
        {"id": "pears", "tool": "stock", "arguments": {"item": "pear"}},  # the body raises
        {"id": "after", "tool": "stock", "arguments": {"item": "plum"}, "after": ["pears"]},
        {"id": "bad", "tool": "total", "arguments": {"items": [{"$ref": "steps.apples.value.x"}]}},
        {"id": "refs", "tool": "total", "arguments": ITEMS},
        {"id": "words", "tool": "text", "arguments": {"topic": "plum"}},
        {"id": "again", "tool": "stock", "arguments": {"item": "apple"}},  # stored once
        {"id": "wrong", "tool": "stock", "arguments": {"item": 5}},  # invalid arguments
        {"id": "nap", "tool": "slow", "arguments": {"seconds": 0.0}},
    ]
    return base_spec(steps=steps, **overrides)


def _run(
    root: Path, raw: dict[str, Any], *, events: list[TraceEvent] | None
) -> tuple[RunOutcome, dict[str, bytes]]:
    spec = RunSpec.model_validate(raw)
    on_event = None if events is None else events.append
    outcome = asyncio.run(
        execute_run(spec, root=root, toolset=make_toolset(Counter()), on_event=on_event)
    )
    files = {
        path.relative_to(outcome.path).as_posix(): path.read_bytes()
        for path in sorted(outcome.path.rglob("*"))
        if path.is_file() and path.name not in ("timings.json", "manifest.json")
    }
    return outcome, files


def _counting_call_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    one_go = Executor._call_step

    async def counted(self: Executor, node: Any) -> None:
        made.append(node.id)
        await one_go(self, node)

    monkeypatch.setattr(Executor, "_call_step", counted)
    return made


@pytest.mark.parametrize("budgets", [{}, {"tool_calls": 4}])
def test_one_go_call_steps_write_every_byte_the_general_path_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budgets: dict[str, Any]
) -> None:
    made = _counting_call_steps(monkeypatch)
    fast, fast_files = _run(tmp_path / "fast", _spec(budgets=budgets), events=None)
    steps = 7 if budgets else 9  # the fifth call ("again") finds the budget spent
    assert (
        made
        == ["apples", "pears", "after", "bad", "refs", "words", "again", "wrong", "nap"][:steps]
    )
    made.clear()
    events: list[TraceEvent] = []
    general, general_files = _run(tmp_path / "general", _spec(budgets=budgets), events=events)
    assert made == []  # a progress callback takes the general path
    assert fast.run_id == general.run_id
    assert fast_files == general_files
    assert len(events) == fast_files["trace.jsonl"].count(b"\n")
    statuses = [o.ok for o in fast.outcome.outputs.values()]
    assert statuses == [o.ok for o in general.outcome.outputs.values()]
    assert fast.outcome.failures == general.outcome.failures
    assert fast.outcome.stopped is general.outcome.stopped is bool(budgets)


def test_an_evidence_budget_takes_the_general_path_and_writes_the_same_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _counting_call_steps(monkeypatch)
    fast, fast_files = _run(tmp_path / "fast", _spec(), events=None)
    assert len(made) == 9
    made.clear()
    budgeted, budgeted_files = _run(
        tmp_path / "budget", _spec(budgets={"evidence_bytes": 10**6}), events=None
    )
    assert made == []
    assert budgeted.run_id != fast.run_id  # the spec differs
    for name in ("trace.jsonl", "claims.json"):
        assert budgeted_files[name] == fast_files[name]
    evidence = sorted(name for name in fast_files if name.startswith("evidence/"))
    assert evidence == sorted(name for name in budgeted_files if name.startswith("evidence/"))
    assert len(evidence) == 4  # apples (twice: stored once), refs, words, nap


class _Raising:
    """A call port whose call raises (a refused frozen replay, a cancelled task)."""

    mode = "live"

    async def call(self, call: ToolCall, timeout: float | None) -> ToolResult:
        raise RuntimeError(f"refused {call.step}")

    def observed(self, call_id: str) -> list[tuple[ToolFailure, str]]:
        return []

    def approvals(self, call_id: str) -> list[dict[str, Any]]:
        return []


@pytest.mark.parametrize("progress", [False, True])
def test_a_call_that_raises_leaves_its_step_started_recorded(
    tmp_path: Path, progress: bool
) -> None:
    toolset = make_toolset(Counter())
    spec = RunSpec.model_validate(_spec())
    events: list[TraceEvent] = []
    recorder = Recorder(tmp_path, on_event=events.append if progress else None)
    executor = Executor(
        spec=spec,
        plan=plan_run(spec, toolset.descriptor()),
        calls=_Raising(),
        clock=LiveClock(None),
        reasoner=reasoner_registry().create(ReasonerSpec()),
        recorder=recorder,
    )
    with pytest.raises(RuntimeError, match=r"^refused apples$"):
        asyncio.run(executor.run())
    recorder.close(sync=False)
    trace = (tmp_path / "trace.jsonl").read_bytes()
    assert trace == (
        b'{"idx":0,"kind":"call","prev":null,"schema_version":1,"step":"apples",'
        b'"type":"step_started"}\n'
    )
    assert executor.tool_calls == 1
    assert len(events) == (1 if progress else 0)


def _mutating_toolset() -> Toolset:
    async def grow(labels: dict[str, Any], items: list[Any]) -> dict[str, Any]:
        labels["grown"] = "yes"
        items.append(len(items))
        return {"labels": labels, "items": items}

    toolset = Toolset()
    toolset.add(Tool.from_function(grow, description="Grow its own arguments."))
    return toolset.seal()


@pytest.mark.parametrize("progress", [False, True])
def test_a_body_that_mutates_its_arguments_leaves_the_call_recorded_as_made(
    tmp_path: Path, progress: bool
) -> None:
    steps = [{"id": "g", "tool": "grow", "arguments": {"labels": {"a": "b"}, "items": [7]}}]
    spec = RunSpec.model_validate({"task": "Grow.", "steps": steps})
    events: list[TraceEvent] = []
    outcome = asyncio.run(
        execute_run(
            spec,
            root=tmp_path,
            toolset=_mutating_toolset(),
            on_event=events.append if progress else None,
        )
    )
    lines = (outcome.path / "trace.jsonl").read_bytes().splitlines()
    called = json.loads(lines[1])
    assert called["call"]["arguments"] == {"items": [7], "labels": {"a": "b"}}
    assert called["call"]["id"] == ToolCall.model_validate(called["call"]).id
    returned = json.loads(lines[2])
    assert returned["result"]["value"] == {"items": [7, 1], "labels": {"a": "b", "grown": "yes"}}
    assert outcome.report.outcome == "passed"
    assert verify_run(outcome.path).ok


_ARGUMENT_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=4), _ARGUMENT_VALUES, max_size=4),
    step=st.text(min_size=1, max_size=6),
    copied=st.booleans(),
)
def test_a_call_is_spliced_as_call_json_encodes_it(
    arguments: dict[str, Any], step: str, copied: bool
) -> None:
    """_call_of is call_json and its canonical JSON (or the same error), its copy parsed back."""
    try:
        expected = call_json("t", arguments, step, copy=not copied)
        expected_bytes = canonical_json(expected)
    except CanonicalizationError as exc:
        with pytest.raises(CanonicalizationError) as raised:
            _call_of("t", arguments, step, copied)
        assert raised.value.message == exc.message
        return
    plain, encoded = _call_of("t", arguments, step, copied)
    assert encoded == expected_bytes
    assert plain == expected
    assert list(plain) == list(expected)
    assert (plain["arguments"] is arguments) is copied


def test_a_repeated_call_id_keeps_only_what_its_latest_call_saw() -> None:
    """A reasoner's provider call made twice: the second one's observations replace the first's.

    The first call's body reports a failure it recovered from and an approval event; the
    second reports neither, so nothing of the first may be recorded as the second's.
    """
    calls = 0

    async def look(q: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            note_failure(ToolFailure(kind="unavailable", message="flaky", where="tool"))
            note_approval({"type": "approval_skipped", "reason": "rule did not match"})
        return q

    toolset = Toolset()
    toolset.add(Tool.from_function(look, description="Look."))
    live = LiveCalls(toolset.seal())
    call = ToolCall(tool="look", arguments={"q": "x"}, step="s")
    assert asyncio.run(live.call(call, None)).value == "x"
    assert [failure.kind for failure, _ in live.observed(call.id)] == ["unavailable"]
    assert live.approvals(call.id) == [{"type": "approval_skipped", "reason": "rule did not match"}]
    assert asyncio.run(live.call(call, None)).value == "x"
    assert live.observed(call.id) == []
    assert live.approvals(call.id) == []
