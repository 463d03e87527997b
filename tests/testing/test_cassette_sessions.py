"""An agent session's run as a cassette: its tool calls and model turns, served in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agent_support import out_of_order_agent
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof.errors import InputError
from toolproof.testing import Cassette

AgentCode = Callable[[toolproof.Session], Coroutine[Any, Any, None]]


def _ticker(ticks: list[str]) -> toolproof.Toolset:
    async def tick(counter: str) -> str:
        """Advance a counter; a repeated identical call answers anew."""
        ticks.append(counter)
        return f"{counter} is at {len(ticks)}"

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(tick))
    return toolset.seal()


def _script(asked: list[int]) -> FunctionModel:
    """Two identical tick calls, one per turn, then an answer quoting the second."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        asked.append(turns)
        if turns < 2:
            return ModelResponse(parts=[ToolCallPart("tick", {"counter": "c"})])
        return ModelResponse(parts=[TextPart('"c is at 2" [call_2]')])

    return FunctionModel(respond)


def _agent(
    asked: list[int], outputs: list[str], prompt: str = "Tick twice.", *, answer: bool = True
) -> AgentCode:
    async def agent(session: toolproof.Session) -> None:
        model = session.pydantic_ai_model(_script(asked))
        runner = Agent(model, toolsets=[session.pydantic_ai_toolset()])
        output = (await runner.run(prompt)).output
        outputs.append(output)
        if answer:  # a cassette records no answer: a frozen replay of one gives none
            session.answer(output)

    return agent


def _record(root: Path) -> Path:
    async def main() -> Path:
        async with toolproof.record_session(_ticker([]), root=root, task="tick") as session:
            await _agent([], [])(session)
        return root / "runs" / str(session.run_id)

    return asyncio.run(main())


def test_a_session_run_serves_its_calls_and_model_turns_in_order(tmp_path: Path) -> None:
    cassette = Cassette(_record(tmp_path))
    assert cassette.recorded_names == ["tick"]
    tick = cassette.toolset()["tick"]
    answers = [asyncio.run(tick.call({"counter": "c"})).value for _ in range(2)]
    assert answers == ["c is at 1", "c is at 2"]

    cassette = Cassette(cassette.path)
    asked: list[int] = []
    outputs: list[str] = []
    ticks: list[str] = []
    session = toolproof.Session.from_cassette(cassette, _ticker(ticks))
    asyncio.run(_agent(asked, outputs)(session))
    assert (asked, ticks, outputs) == ([], [], ['"c is at 2" [call_2]'])  # nothing was asked
    assert (cassette.served, cassette.served_turns, cassette.misses) == (2, 3, [])
    assert session.answered == {"answer": '"c is at 2" [call_2]', "citations": []}


def test_without_the_toolset_the_cassette_presents_the_recorded_tools(tmp_path: Path) -> None:
    cassette = Cassette(_record(tmp_path))
    assert cassette.presented is not None
    toolset = cassette.toolset()
    assert [(t.spec.name, t.spec.description, t.spec.input_schema) for t in toolset] == [
        (
            "tick",
            "Advance a counter; a repeated identical call answers anew.",
            {
                "additionalProperties": False,
                "properties": {"counter": {"type": "string"}},
                "required": ["counter"],
                "type": "object",
            },
        )
    ]
    asked: list[int] = []
    outputs: list[str] = []
    session = toolproof.Session.from_cassette(Cassette(cassette.path))
    asyncio.run(_agent(asked, outputs)(session))  # the model requests match: served
    assert (asked, outputs, session.live_turns) == ([], ['"c is at 2" [call_2]'], 0)


def test_a_run_that_stores_no_presented_tools_still_gets_open_schemas(tmp_path: Path) -> None:
    # a session recorded before runs stored their tools: the names, open schemas
    v0 = Path(__file__).resolve().parents[1] / "fixtures" / "agent_runs_v0" / "runs"
    cassette = Cassette(v0 / "run_9396a19f6c4611d1585283d547cd382415635e4e6797d508671aa0561b46245b")
    assert cassette.presented is None
    assert [(t.spec.name, t.spec.input_schema) for t in cassette.toolset()] == [
        ("lookup", {"type": "object"}),
        ("read_file", {"type": "object"}),
    ]


def test_a_changed_request_fails_closed_naming_it(tmp_path: Path) -> None:
    cassette = Cassette(_record(tmp_path))
    session = toolproof.Session.from_cassette(cassette, _ticker([]))
    asked: list[int] = []
    with pytest.raises(InputError) as missed:
        asyncio.run(_agent(asked, [], prompt="Tick three times.")(session))
    lines = missed.value.message.splitlines()
    assert lines[0] == (
        f"cassette {cassette.path.name}: no recorded pydantic-ai model request like this one "
        "(record mode 'none'); nearest recorded request:"
    )
    assert any(line.startswith("-") and "Tick twice." in line for line in lines)
    assert any(line.startswith("+") and "Tick three times." in line for line in lines)
    assert (asked, cassette.misses) == ([], [missed.value.message])


def test_once_records_an_agent_session_cassette_then_serves_it(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "ticks"
    ticks: list[str] = []
    asked: list[int] = []
    recording = Cassette(path, "once")
    session = toolproof.Session.from_cassette(recording, _ticker(ticks))
    asyncio.run(_agent(asked, [])(session))
    assert (ticks, asked) == (["c", "c"], [0, 1, 2])
    assert (recording.recorded_calls, recording.recorded_turns) == (2, 3)
    asyncio.run(recording.save())
    assert toolproof.verify_run(path).ok
    events = [json.loads(line) for line in (path / "trace.jsonl").read_bytes().splitlines()]
    kinds = [e["type"] for e in events if e["type"] in ("tool_called", "model_turn")]
    assert kinds == ["model_turn", "tool_called", "model_turn", "tool_called", "model_turn"]
    # the cassette stores its tools as presented: it replays with no Toolset
    presented = json.loads((path / "runtime.json").read_bytes())["presented"]
    assert [tool["name"] for tool in presented["tools"]] == ["tick"]
    replay = asyncio.run(toolproof.replay_session(path, _agent(asked, [], answer=False)))
    assert (replay.identical, replay.calls, replay.turns, asked) == (True, 2, 3, [0, 1, 2])
    alone = toolproof.Session.from_cassette(Cassette(path))
    asyncio.run(_agent(asked, [])(alone))
    assert (asked, alone.live_turns) == ([0, 1, 2], 0)

    served = Cassette(path, "once")
    outputs: list[str] = []
    asyncio.run(_agent(asked, outputs)(toolproof.Session.from_cassette(served, _ticker(ticks))))
    assert (ticks, asked, outputs) == (["c", "c"], [0, 1, 2], ['"c is at 2" [call_2]'])
    assert (served.served, served.served_turns, asyncio.run(served.save())) == (2, 3, None)


def _again(asked: list[int], outputs: list[str]) -> AgentCode:
    """The recorded conversation ("Tick twice."), then a new one ("Tick again.")."""

    async def agent(session: toolproof.Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(_script(asked)), toolsets=[session.pydantic_ai_toolset()]
        )
        for prompt in ("Tick twice.", "Tick again."):
            outputs.append((await runner.run(prompt)).output)
        session.answer(outputs[-1])

    return agent


def _steps(run: Path) -> list[str]:
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    return [e["step"] for e in events if e["type"] in ("tool_called", "model_turn")]


def test_new_episodes_serves_known_turns_and_asks_the_model_only_for_new_ones(
    tmp_path: Path,
) -> None:
    path = _record(tmp_path)
    recorded = _steps(path)
    ticks: list[str] = []
    asked: list[int] = []
    cassette = Cassette(path, "new_episodes")
    session = toolproof.Session.from_cassette(cassette, _ticker(ticks))
    asyncio.run(_agent(asked, [])(session))
    # every turn and call is known: served, none asked live, nothing to write
    assert (asked, ticks, session.live_turns) == ([], [], 0)
    assert (cassette.served, cassette.served_turns, cassette.recorded_turns) == (2, 3, 0)
    assert asyncio.run(cassette.save()) is None
    assert _steps(path) == recorded

    cassette = Cassette(path, "new_episodes")
    session = toolproof.Session.from_cassette(cassette, _ticker(ticks))
    outputs: list[str] = []
    asyncio.run(_again(asked, outputs)(session))
    # only the new conversation's three turns reach the model, its two calls the tool
    assert (asked, session.live_turns, ticks) == ([0, 1, 2], 3, ["c", "c"])
    assert (cassette.served, cassette.served_turns) == (2, 3)
    assert (cassette.recorded_calls, cassette.recorded_turns, cassette.misses) == (2, 3, [])
    assert outputs == ['"c is at 2" [call_2]', '"c is at 2" [call_2]']
    asyncio.run(cassette.save())
    assert toolproof.verify_run(path).ok
    assert _steps(path) == [  # the recorded steps kept, the new ones numbered after them
        *recorded,
        "turn-00000004",
        "call-00000003",
        "turn-00000005",
        "call-00000004",
        "turn-00000006",
    ]
    again = Cassette(path)
    assert (len(again.calls), len(again.turns)) == (4, 6)
    replayed: list[int] = []
    session = toolproof.Session.from_cassette(again, _ticker(ticks))
    asyncio.run(_again(replayed, [])(session))
    assert (replayed, session.live_turns, ticks) == ([], 0, ["c", "c"])
    assert (again.served, again.served_turns, again.misses) == (4, 6, [])


def test_identical_turns_answered_out_of_order_are_served_by_the_order_asked(
    tmp_path: Path,
) -> None:
    async def main() -> Path:
        async with toolproof.record_session(_ticker([]), root=tmp_path, task="same") as session:
            await out_of_order_agent([], [])(session)
        return tmp_path / "runs" / str(session.run_id)

    path = asyncio.run(main())
    assert _steps(path) == ["turn-00000002", "turn-00000001"]
    asked: list[int] = []
    outputs: list[str] = []
    cassette = Cassette(path)
    asyncio.run(out_of_order_agent(asked, outputs)(toolproof.Session.from_cassette(cassette)))
    assert (asked, outputs) == ([], ["A: response to request 1 / B: response to request 2"])

    cassette = Cassette(path, "new_episodes")
    outputs = []
    asyncio.run(
        out_of_order_agent(asked, outputs, "other?")(
            toolproof.Session.from_cassette(cassette, _ticker([]))
        )
    )
    assert (asked, cassette.served_turns, cassette.recorded_turns) == ([1], 2, 1)
    assert outputs == [
        "A: response to request 1 / B: response to request 2",
        "response to request 1",
    ]
    asyncio.run(cassette.save())
    assert _steps(path) == ["turn-00000002", "turn-00000001", "turn-00000003"]
    outputs = []
    served = Cassette(path)
    agent = out_of_order_agent(asked, outputs, "other?")
    asyncio.run(agent(toolproof.Session.from_cassette(served)))
    assert (asked, served.served_turns, served.misses) == ([1], 3, [])
    assert outputs == [
        "A: response to request 1 / B: response to request 2",
        "response to request 1",
    ]
