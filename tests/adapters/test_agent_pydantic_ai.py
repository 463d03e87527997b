"""A real pydantic-ai agent loop recorded as a run: answer checked, verified, replayed frozen."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agent_support import record_agent
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof import ReplayRefused, Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.verify.verifier import verify_run

FILES = {"README.md": "toolproof records every tool call.\nCreated by Ada.", "LICENSE": "MIT"}


def _toolset(bodies: list[str]) -> Toolset:
    async def read_file(path: str) -> str:
        """Read a file of the repository."""
        bodies.append(path)
        await asyncio.sleep(0)
        return FILES.get(path, "")

    async def lookup(item: str) -> dict[str, Any]:
        """Look an item up."""
        bodies.append(item)
        return {"item": item, "count": len(item)}

    toolset = Toolset()
    toolset.add(Tool.from_function(read_file))
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _model(answer: str, second: dict[str, Any] | None = None) -> FunctionModel:
    """Turn 1: two concurrent calls; turn 2: a repeat of the first; turn 3: the answer."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        if turns == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("read_file", {"path": "README.md"}, tool_call_id="a"),
                    ToolCallPart("lookup", second or {"item": "pear"}, tool_call_id="b"),
                ]
            )
        if turns == 1:
            return ModelResponse(
                parts=[ToolCallPart("read_file", {"path": "README.md"}, tool_call_id="c")]
            )
        return ModelResponse(parts=[TextPart(answer)])

    return FunctionModel(respond)


GOOD = (
    'The README says "toolproof records every tool call." [call_3] '
    'and was "Created by Ada" [call_3].'
)


def _agent(
    answer: str, second: dict[str, Any] | None = None
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        runner = Agent(_model(answer, second), toolsets=[session.pydantic_ai_toolset()])
        result = await runner.run("Who created README.md?")
        session.answer(result.output)

    return agent


def _record(tmp_path: Path, answer: str, bodies: list[str]) -> Path:
    async def go() -> str:
        async with toolproof.record_session(
            _toolset(bodies), root=tmp_path, task="Who created README.md?"
        ) as session:
            await _agent(answer)(session)
        assert session.run_id is not None
        return session.run_id

    return tmp_path / "runs" / asyncio.run(go())


def test_an_agent_run_records_verifies_and_its_quotes_are_byte_exact(tmp_path: Path) -> None:
    bodies: list[str] = []
    run = _record(tmp_path, GOOD, bodies)
    assert sorted(bodies) == ["README.md", "README.md", "pear"]
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["type"], claim["status"], claim["statement"]) == ("derived", "validated", GOOD)
    assert [c["text"] for c in claim["citations"]] == [
        "toolproof records every tool call.",
        "Created by Ada",
    ]
    support = claim["supports"][1]
    evidence = RunEvidence.open(run).read(support["evidence"])
    assert evidence[support["start"] : support["end"]] == b"Created by Ada"
    spec = json.loads((run / "spec.json").read_bytes())
    assert spec["task"] == "Who created README.md?"
    assert [(s["id"], s["tool"]) for s in spec["steps"]][2] == ("call-00000003", "read_file")


def test_a_forged_quote_fails_verify_naming_the_quote_and_the_call(tmp_path: Path) -> None:
    forged = 'The README was "written by Grace" [call_3].'
    run = _record(tmp_path, forged, [])
    verification = verify_run(run)
    assert not verification.ok
    messages = [str(f) for f in verification.failures]
    assert any(
        "is derived but not validated: quote 'written by Grace' is not in the result of call_3" in m
        for m in messages
    ), messages


def test_a_frozen_replay_serves_every_call_and_runs_no_tool_body(tmp_path: Path) -> None:
    bodies: list[str] = []
    run = _record(tmp_path, GOOD, bodies)
    ran = len(bodies)
    replay = asyncio.run(toolproof.replay_session(run, _agent(GOOD)))
    assert (replay.identical, replay.calls, replay.live_calls, replay.verified) == (
        True,
        3,
        0,
        True,
    )
    assert len(bodies) == ran


def test_a_changed_agent_is_refused_at_the_first_divergent_call_with_a_diff(tmp_path: Path) -> None:
    run = _record(tmp_path, GOOD, [])
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(toolproof.replay_session(run, _agent(GOOD, second={"item": "apple"})))
    message = refused.value.message
    first_line, *diff = message.splitlines()
    assert first_line.startswith("frozen replay refused at event ")
    assert "an unrecorded call to 'lookup' (occurrence 1)" in first_line
    assert '-    "item": "pear"' in diff and '+    "item": "apple"' in diff
    event = refused.value.event
    recorded = (run / "trace.jsonl").read_bytes().splitlines()[event]
    assert json.loads(recorded)["type"] == "tool_called"
    assert json.loads(recorded)["call"]["arguments"] == {"item": "pear"}


def _ticking_agent(
    outputs: list[str],
) -> tuple[Toolset, Callable[[Session], Coroutine[Any, Any, None]]]:
    """Two identical concurrent ``tick`` calls asked A then B; live, B returns first."""
    b_returned = asyncio.Event()
    ticks: list[str] = []

    async def tick(counter: str) -> str:
        """Advance a counter."""
        ticks.append(counter)
        number = len(ticks)
        if number == 1:  # A waits for B, which returns (and is recorded) first
            await b_returned.wait()
        else:
            b_returned.set()
        return f"tick {number}"

    toolset = Toolset()
    toolset.add(Tool.from_function(tick))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            calls = [ToolCallPart("tick", {"counter": "c"}, tool_call_id=i) for i in "ab"]
            return ModelResponse(parts=list(calls))
        returned = [
            part
            for message in messages
            for part in message.parts
            if part.part_kind == "tool-return"
        ]
        return ModelResponse(
            parts=[TextPart(" / ".join(f"{p.tool_call_id}: {p.content}" for p in returned))]
        )

    async def agent(session: Session) -> None:
        runner = Agent(FunctionModel(respond), toolsets=[session.pydantic_ai_toolset()])
        outputs.append((await runner.run("Tick twice at once.")).output)
        session.answer(outputs[-1])

    return toolset.seal(), agent


def test_identical_calls_returned_out_of_order_replay_by_the_order_asked(tmp_path: Path) -> None:
    outputs: list[str] = []
    toolset, agent = _ticking_agent(outputs)
    run = record_agent(toolset, tmp_path, "tick", agent)
    assert outputs == ["a: tick 1 / b: tick 2"]
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    returned = [(e["step"], e["result"]["value"]) for e in events if e["type"] == "tool_returned"]
    assert returned == [("call-00000002", "tick 2"), ("call-00000001", "tick 1")]
    replayed: list[str] = []
    replay = asyncio.run(toolproof.replay_session(run, _ticking_agent(replayed)[1]))
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 2, 0)
    assert replayed == ["a: tick 1 / b: tick 2"]  # A served call 1's result, B call 2's


def test_a_changed_answer_is_refused(tmp_path: Path) -> None:
    run = _record(tmp_path, GOOD, [])
    with pytest.raises(ReplayRefused, match="the answer differs"):
        asyncio.run(toolproof.replay_session(run, _agent(GOOD + " Also MIT.")))


def test_a_missing_run_directory_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "runs" / "run_0123"
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(toolproof.replay_session(missing, _agent(GOOD)))
    assert str(refused.value) == (
        f"frozen replay refused: no run directory at {missing} "
        "(rule: run_dir is a run directory, ROOT/runs/<run_id>)"
    )
    assert refused.value.check == "verify"


def test_a_changed_toolset_descriptor_refuses_the_replay(tmp_path: Path) -> None:
    run = _record(tmp_path, GOOD, [])
    changed = Toolset()
    for tool in _toolset([]):
        changed.add(tool)

    async def extra(text: str) -> str:
        """Another tool."""
        return text

    changed.add(Tool.from_function(extra))
    changed.seal()
    with pytest.raises(ReplayRefused, match="the runtime descriptor changed: added extra"):
        asyncio.run(toolproof.replay_session(run, _agent(GOOD), toolset=changed))
    same = asyncio.run(toolproof.replay_session(run, _agent(GOOD), toolset=_toolset([])))
    assert same.identical is True


AGENT_MODULE = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel


def _script(item):
    def respond(messages, info):
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("lookup", {"item": item})])
        return ModelResponse(parts=[TextPart('It has a "count" [call_1].')])

    return FunctionModel(respond)


def _agent(item):
    async def agent(session):
        runner = Agent(_script(item), toolsets=[session.pydantic_ai_toolset()])
        session.answer((await runner.run("What is it?")).output)

    return agent


agent = _agent("pear")
changed = _agent("plum")
"""


def test_the_cli_replays_an_agent_run_and_refuses_a_changed_agent(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(AGENT_MODULE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        import my_agent  # type: ignore[import-not-found]

        async def go() -> str:
            # the answer quotes one word ("count"): checked at level quote, as this
            # test is about replay (docs/grounding.md)
            async with toolproof.record_session(
                _toolset([]), root=tmp_path / "root", task="What is it?", grounding="quote"
            ) as session:
                await my_agent.agent(session)
            assert session.run_id is not None
            return session.run_id

        run_id = asyncio.run(go())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_agent", None)
    toolproof_cli = [str(Path(sys.executable).parent / "toolproof")]
    base = [*toolproof_cli, "replay", run_id, "--root", str(tmp_path / "root"), "--agent"]
    done = subprocess.run(
        [*base, "my_agent:agent", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["identical"], document["calls"], document["live_calls"]) == (True, 1, 0)
    plain = subprocess.run(
        [*base, "my_agent:agent"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert (plain.returncode, plain.stdout) == (
        0,
        "agent replay identical: 1 tool call served from the recording, 0 live calls; "
        "the run verifies\n",
    )
    refused = subprocess.run(
        [*base, "my_agent:changed"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2
    assert "error: frozen replay refused at event " in refused.stderr
    assert "an unrecorded call to 'lookup' (occurrence 1)" in refused.stderr
    assert '-    "item": "pear"' in refused.stderr and '+    "item": "plum"' in refused.stderr
    bad = subprocess.run(
        [*base, "my_agent"], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    assert (bad.returncode, bad.stderr.strip()) == (
        1,
        "error: --agent 'my_agent': expected MODULE:FUNCTION",
    )
