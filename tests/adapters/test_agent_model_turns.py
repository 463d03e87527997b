"""Model turns as evidence: pydantic-ai and Agents SDK models recorded, verified, replayed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agent_support import out_of_order_agent
from agents import Agent as AgentsAgent
from agents import Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.messages import ModelResponse as PaiResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof import ReplayRefused, Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

FILES = {"README.md": "toolproof records every tool call.\nCreated by Ada."}
GOOD = 'The README was "Created by Ada" [call_3].'


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


def _script(asked: list[int]) -> FunctionModel:
    """Turn 1: two concurrent calls; turn 2: a repeat of the first; turn 3: the answer."""
    from pydantic_ai.messages import TextPart, ToolCallPart

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        turns = sum(isinstance(m, PaiResponse) for m in messages)
        asked.append(turns)
        if turns == 0:
            return PaiResponse(
                parts=[
                    ToolCallPart("read_file", {"path": "README.md"}),
                    ToolCallPart("lookup", {"item": "pear"}),
                ]
            )
        if turns == 1:
            return PaiResponse(parts=[ToolCallPart("read_file", {"path": "README.md"})])
        return PaiResponse(parts=[TextPart(GOOD)])

    return FunctionModel(respond)


def _pai_agent(
    asked: list[int], prompt: str = "Who created README.md?"
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(_script(asked)), toolsets=[session.pydantic_ai_toolset()]
        )
        result = await runner.run(prompt)
        session.answer(result.output)

    return agent


def _record(tmp_path: Path, agent: Callable[[Session], Coroutine[Any, Any, None]]) -> Path:
    async def go() -> str:
        # some answers quote one word ("count"): checked at level quote, as these
        # tests are about model turns (docs/grounding.md)
        async with toolproof.record_session(
            _toolset([]), root=tmp_path, task="Who created README.md?", grounding="quote"
        ) as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    return tmp_path / "runs" / asyncio.run(go())


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]


def test_pydantic_ai_turns_are_model_steps_with_their_bytes_as_evidence(tmp_path: Path) -> None:
    asked: list[int] = []
    run = _record(tmp_path, _pai_agent(asked))
    assert asked == [0, 1, 2]
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    events = _events(run)
    turns = [e for e in events if e["type"] == "model_turn"]
    assert [(e["idx"], e["step"], e["source"]) for e in turns] == [
        (3, "turn-00000001", "pydantic-ai"),
        (18, "turn-00000002", "pydantic-ai"),
        (28, "turn-00000003", "pydantic-ai"),
    ]
    assert [e["type"] for e in events[:5]] == [
        "step_started",
        "evidence_registered",
        "evidence_registered",
        "model_turn",
        "step_finished",
    ]
    assert events[0]["kind"] == "model"
    assert turns[0]["model"] == "function:function:respond:"
    assert [e["evidence"]["source"]["kind"] for e in events[1:3]] == [
        "model_request",
        "model_response",
    ]
    request = json.loads(RunEvidence.open(run).read(events[1]["evidence"]["id"]))
    assert sorted(request) == ["messages", "model_settings", "parameters"]
    assert request["messages"][0]["parts"][0]["content"] == "Who created README.md?"
    tools = sorted(t["name"] for t in request["parameters"]["function_tools"])
    assert tools == ["lookup", "read_file"]
    response = json.loads(RunEvidence.open(run).read(events[2]["evidence"]["id"]))
    assert [p["tool_name"] for p in response["parts"]] == ["read_file", "lookup"]
    spec = json.loads((run / "spec.json").read_bytes())
    assert [(s["id"], s["kind"]) for s in spec["steps"]][:3] == [
        ("turn-00000001", "model"),
        ("call-00000002", "call"),  # lookup, admitted second, returned first
        ("call-00000001", "call"),
    ]
    runtime = json.loads((run / "runtime.json").read_bytes())
    assert [(p["kind"], p["name"], p["origin"]) for p in runtime["providers"]] == [
        ("model", "pydantic-ai function:function:respond:", "agent-session")
    ]
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["status"], claim["citations"][0]["text"]) == ("validated", "Created by Ada")


def test_pydantic_ai_frozen_replay_serves_turns_and_asks_no_model(tmp_path: Path) -> None:
    asked: list[int] = []
    run = _record(tmp_path, _pai_agent(asked))
    replayed: list[int] = []
    replay = asyncio.run(toolproof.replay_session(run, _pai_agent(replayed), toolset=_toolset([])))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 3, 3, 0)
    assert replayed == []
    plain = asyncio.run(replay_run(run))
    assert (plain.identical, plain.first_difference) == (True, None)


def test_a_changed_prompt_refuses_at_the_first_model_turn_with_a_diff(tmp_path: Path) -> None:
    run = _record(tmp_path, _pai_agent([]))
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(
            toolproof.replay_session(
                run, _pai_agent([], prompt="Who wrote README.md?"), toolset=_toolset([])
            )
        )
    first, *diff = refused.value.message.splitlines()
    assert first == (
        "frozen replay refused at event 3: the agent made an unrecorded pydantic-ai model "
        "request (occurrence 1); a live model turn would be a new run"
    )
    assert refused.value.event == 3
    # the diff is of the requests' normal forms (docs/agents.md, "Replay matching")
    assert '-      "content": "Who created README.md?",' in diff
    assert '+      "content": "Who wrote README.md?",' in diff


def test_a_replay_without_the_toolset_presents_the_recorded_tools(tmp_path: Path) -> None:
    # an older run, which stores no tools, says it needs toolset= (test_agent_self_contained)
    run = _record(tmp_path, _pai_agent([]))
    replayed: list[int] = []
    replay = asyncio.run(toolproof.replay_session(run, _pai_agent(replayed)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 3, 3, 0)
    assert replayed == []


class ScriptedModel(Model):
    """A ``Model`` of the SDK's interface: two concurrent calls, then the answer."""

    def __init__(self, asked: list[str]) -> None:
        self.asked = asked

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        answered = isinstance(input, list) and any(
            (item.get("type") if isinstance(item, dict) else None) == "function_call_output"
            for item in input
        )
        self.asked.append("answer" if answered else "calls")
        if not answered:
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name="lookup",
                    call_id=f"c{n}",
                    id=f"f{n}",
                    arguments=json.dumps({"item": item}),
                )
                for n, item in enumerate(["pear", "plum"])
            ]
        else:
            text = 'It has a "count" [call_1].'  # "pear" would echo its argument
            output = [
                ResponseOutputMessage(
                    id="m1",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _agents_agent(
    asked: list[str], question: str = "What is it?"
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        runner = AgentsAgent(
            name="lookup",
            instructions="Answer with quotes.",
            model=session.openai_agents_model(ScriptedModel(asked)),
            tools=session.openai_agents_tools(),
        )
        result = await Runner.run(runner, question, run_config=RunConfig(tracing_disabled=True))
        session.answer(str(result.final_output))

    return agent


def test_agents_sdk_turns_record_verify_and_replay_frozen(tmp_path: Path) -> None:
    asked: list[str] = []
    run = _record(tmp_path, _agents_agent(asked))
    assert asked == ["calls", "answer"]
    assert verify_run(run).ok
    turns = [e for e in _events(run) if e["type"] == "model_turn"]
    assert [(e["step"], e["source"], e["model"]) for e in turns] == [
        ("turn-00000001", "openai-agents", "ScriptedModel"),
        ("turn-00000002", "openai-agents", "ScriptedModel"),
    ]
    first = _events(run)[1]["evidence"]["id"]
    request = json.loads(RunEvidence.open(run).read(first))
    assert (request["system_instructions"], request["input"]) == (
        "Answer with quotes.",
        [{"content": "What is it?", "role": "user"}],
    )
    assert [t["name"] for t in request["tools"]] == ["lookup", "read_file"]
    replayed: list[str] = []
    replay = asyncio.run(
        toolproof.replay_session(run, _agents_agent(replayed), toolset=_toolset([]))
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 2, 2, 0)
    assert replayed == []
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(
            toolproof.replay_session(
                run, _agents_agent([], question="What was it?"), toolset=_toolset([])
            )
        )
    assert refused.value.event == turns[0]["idx"]
    assert '-      "content": "What is it?",' in refused.value.message
    assert '+      "content": "What was it?",' in refused.value.message


def _counting_agent(asked: list[int]) -> Callable[[Session], Coroutine[Any, Any, None]]:
    """Two concurrent runs, then a third, all asking the model the identical request."""
    from pydantic_ai.messages import TextPart

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        # async: pydantic-ai runs a sync FunctionModel function on a thread pool, where
        # the two concurrent turns would be answered in whatever order the threads run
        asked.append(len(asked) + 1)
        return PaiResponse(parts=[TextPart(f"answer {len(asked)}")])

    async def agent(session: Session) -> None:
        runner = Agent(session.pydantic_ai_model(FunctionModel(respond)))
        both = await asyncio.gather(runner.run("same?"), runner.run("same?"))
        third = await runner.run("same?")
        session.answer(" / ".join(r.output for r in [*both, third]))

    return agent


def test_identical_model_requests_are_served_in_recorded_order(tmp_path: Path) -> None:
    asked: list[int] = []
    run = _record(tmp_path, _counting_agent(asked))
    assert asked == [1, 2, 3]
    keys = {e["key"] for e in _events(run) if e["type"] == "model_turn"}
    assert len(keys) == 1
    replayed: list[int] = []
    replay = asyncio.run(toolproof.replay_session(run, _counting_agent(replayed)))
    assert (replay.identical, replay.turns, replay.calls) == (True, 3, 0)
    assert replayed == []
    spec = json.loads((run / "spec.json").read_bytes())
    assert spec["reasoner"]["params"]["answer"] == "answer 1 / answer 2 / answer 3"


def test_identical_turns_answered_out_of_order_replay_by_the_order_asked(tmp_path: Path) -> None:
    asked: list[int] = []
    outputs: list[str] = []
    run = _record(tmp_path, out_of_order_agent(asked, outputs))
    assert asked == [1, 2]
    assert outputs == ["A: response to request 1 / B: response to request 2"]
    assert verify_run(run).ok
    events = _events(run)
    turns = [e for e in events if e["type"] == "model_turn"]
    assert len({e["key"] for e in turns}) == 1
    # written as answered (B first), numbered as asked (B is the second turn)
    assert [e["step"] for e in turns] == ["turn-00000002", "turn-00000001"]
    stored = RunEvidence.open(run)
    responses = {
        e["step"]: json.loads(stored.read(e["evidence"]["id"]))["parts"][0]["content"]
        for e in events
        if e["type"] == "evidence_registered"
        and e["evidence"]["source"]["kind"] == "model_response"
    }
    assert responses == {
        "turn-00000001": "response to request 1",
        "turn-00000002": "response to request 2",
    }
    replayed: list[int] = []
    replayed_outputs: list[str] = []
    replay = asyncio.run(
        toolproof.replay_session(run, out_of_order_agent(replayed, replayed_outputs))
    )
    assert (replay.identical, replay.turns, replay.live_calls) == (True, 2, 0)
    assert replayed == []  # no model was asked
    assert replayed_outputs == ["A: response to request 1 / B: response to request 2"]
    plain = asyncio.run(replay_run(run))  # the run re-executes from its recorded steps
    assert (plain.identical, plain.first_difference) == (True, None)


def test_a_tampered_model_response_fails_verify_and_refuses_replay(tmp_path: Path) -> None:
    run = _record(tmp_path, _pai_agent([]))
    response = _events(run)[2]["evidence"]
    assert response["source"]["kind"] == "model_response"
    path = run / "evidence.pack"  # the response's bytes, changed where the pack holds them
    stored = RunEvidence.open(run).read(response["id"])
    data = bytearray(path.read_bytes())
    data[bytes(data).index(stored) + stored.index(b"read_file")] = ord("R")
    path.write_bytes(bytes(data))
    verification = verify_run(run)
    assert not verification.ok
    assert any("evidence.pack" in str(f) for f in verification.failures)
    with pytest.raises(ReplayRefused, match=r"^frozen replay refused: "):
        asyncio.run(toolproof.replay_session(run, _pai_agent([]), toolset=_toolset([])))
