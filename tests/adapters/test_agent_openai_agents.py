"""The OpenAI Agents SDK's real ``Runner.run`` loop, with a ``Model`` implementation, recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import toolproof
from toolproof import ReplayRefused, Session, Tool, Toolset
from toolproof.verify.verifier import verify_run


class ScriptedModel(Model):
    """A ``Model`` of the SDK's interface: two concurrent calls, then the answer."""

    def __init__(self, city: str) -> None:
        self.city = city

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        answered = isinstance(input, list) and any(
            (item.get("type") if isinstance(item, dict) else None) == "function_call_output"
            for item in input
        )
        if not answered:
            output: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name="weather",
                    call_id=f"c{n}",
                    id=f"f{n}",
                    arguments=json.dumps({"city": city}),
                )
                for n, city in enumerate([self.city, "Oslo"])
            ]
        else:
            text = 'Lisbon is "sunny, 24 C" [call_1].'
            output = [
                ResponseOutputMessage(
                    id="m1",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _toolset(bodies: list[str]) -> Toolset:
    async def weather(city: str) -> str:
        """Today's weather in a city."""
        bodies.append(city)
        await asyncio.sleep(0.01 if city == "Oslo" else 0)
        return {"Lisbon": "sunny, 24 C", "Oslo": "snow, -3 C"}.get(city, "unknown")

    toolset = Toolset()
    toolset.add(Tool.from_function(weather))
    return toolset.seal()


def _agent(city: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        runner = Agent(
            name="weather", model=ScriptedModel(city), tools=session.openai_agents_tools()
        )
        result = await Runner.run(
            runner, "Weather in Lisbon?", run_config=RunConfig(tracing_disabled=True)
        )
        session.answer(str(result.final_output))

    return agent


def test_an_openai_agents_run_records_verifies_and_replays_frozen(tmp_path: Path) -> None:
    bodies: list[str] = []

    async def go() -> str:
        async with toolproof.record_session(
            _toolset(bodies), root=tmp_path, task="Weather in Lisbon?"
        ) as session:
            await _agent("Lisbon")(session)
        assert session.run_id is not None
        return session.run_id

    run = tmp_path / "runs" / asyncio.run(go())
    assert sorted(bodies) == ["Lisbon", "Oslo"]
    assert verify_run(run).ok
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["status"], claim["citations"][0]["text"]) == ("validated", "sunny, 24 C")
    steps = json.loads((run / "spec.json").read_bytes())["steps"]
    assert [s["arguments"] for s in steps] == [{"city": "Lisbon"}, {"city": "Oslo"}]
    replay = asyncio.run(toolproof.replay_session(run, _agent("Lisbon")))
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 2, 0)
    assert sorted(bodies) == ["Lisbon", "Oslo"]
    with pytest.raises(ReplayRefused, match="an unrecorded call to 'weather'"):
        asyncio.run(toolproof.replay_session(run, _agent("Porto")))
