"""Streamed model turns: pydantic-ai ``run_stream`` and the Agents SDK ``Runner.run_streamed``.

The frameworks' real loops stream from their own scripted models (pydantic-ai's
``FunctionModel(stream_function=...)``, the Agents SDK's ``agents.testing.ScriptedModel``,
whose ``stream_response`` yields the Responses events a real model streams). Each turn
is recorded with its exact streamed bytes (one JSON line per event, each a chunk) and
its assembled response; frozen, the same events come back in the same chunks, the run
verifies, and the model is never asked. (HTTP: tests/runs/test_agent_http_stream.py.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import RunConfig, Runner
from agents.stream_events import RawResponsesStreamEvent
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from cli_support import toolproof as toolproof_cli
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

import toolproof
from toolproof import Session, Tool, Toolset
from toolproof.adapters.frameworks import openai_agents_model, pydantic_ai_model
from toolproof.bundle.evidence import RunEvidence
from toolproof.errors import InputError
from toolproof.runs.recorded import stream_chunks
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

ANSWER = 'Oslo has been "the capital since 1814" [call_AbC].'


def _toolset() -> Toolset:
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: the capital since 1814"

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _record(tmp_path: Path, agent: Callable[[Session], Coroutine[Any, Any, None]]) -> Path:
    async def go() -> str:
        async with toolproof.record_session(_toolset(), root=tmp_path, task="Capital?") as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    return tmp_path / "runs" / asyncio.run(go())


def _turns(run: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    return [e for e in events if e["type"] == "model_turn"]


def _recorded_chunks(run: Path, turn: dict[str, Any]) -> list[bytes]:
    """A framework turn's chunks: its ``model_stream`` evidence cut at its recorded sizes."""
    chunks = stream_chunks(
        RunEvidence.open(run).read(turn["detail"]["stream"]["evidence"]), turn["detail"]
    )
    assert chunks is not None
    return chunks


def _check(run: Path, live: list[bytes], source: str) -> list[list[bytes]]:
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    turns = _turns(run)
    assert [t["source"] for t in turns] == [source, source]
    recorded = [_recorded_chunks(run, turn) for turn in turns]
    assert [c for chunks in recorded for c in chunks] == live  # what the agent saw, as recorded
    for turn, chunks in zip(turns, recorded, strict=True):
        assert turn["detail"]["stream"]["chunks"] == [len(c) for c in chunks]
        assert all(c.endswith(b"\n") and c.count(b"\n") == 1 for c in chunks)
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["status"], claim["citations"][0]["text"]) == (
        "validated",
        "the capital since 1814",
    )
    return recorded


# -- pydantic-ai ------------------------------------------------------------------------------


def _pai_stream(asked: list[int]) -> FunctionModel:
    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        turns = sum(isinstance(m, ModelResponse) for m in messages)
        asked.append(turns)
        if turns == 0:
            yield {0: DeltaToolCall(name="lookup", json_args='{"city"', tool_call_id="call_AbC")}
            yield {0: DeltaToolCall(json_args=': "Oslo"}')}
        else:
            yield 'Oslo has been "the capital '
            yield 'since 1814" '
            yield "[call_AbC]."

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[TextPart(ANSWER)])
        return ModelResponse(parts=[ToolCallPart("lookup", '{"city": "Oslo"}', "call_AbC")])

    return FunctionModel(whole, stream_function=stream)


def _pai_agent(
    asked: list[int], seen: list[bytes], texts: list[str]
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    """``agent.run_stream``, its answer read as text deltas."""

    async def agent(session: Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(_pai_stream(asked)), toolsets=[session.pydantic_ai_toolset()]
        )
        async with runner.run_stream("Capital?") as result:
            async for text in result.stream_text(delta=True, debounce_by=None):
                texts.append(text)
        session.answer("".join(texts))

    return agent


def _pai_iter_agent(
    asked: list[int], seen: list[bytes]
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    """``agent.iter``, every model request node streamed: each event the model streamed."""

    async def agent(session: Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(_pai_stream(asked)), toolsets=[session.pydantic_ai_toolset()]
        )
        async with runner.iter("Capital?") as run:
            async for node in run:
                if Agent.is_model_request_node(node):
                    async with node.stream(run.ctx) as events:
                        async for event in events:  # the agent stamps each with its origin
                            plain = replace(event, origin=None)
                            seen.append(pydantic_ai_model.stream_event_bytes(plain))
        assert run.result is not None
        session.answer(run.result.output)

    return agent


def test_pydantic_ai_run_stream_is_recorded_and_replayed_in_its_chunks(tmp_path: Path) -> None:
    asked: list[int] = []
    texts: list[str] = []
    run = _record(tmp_path, _pai_agent(asked, [], texts))
    assert asked == [0, 1]
    assert texts == ['Oslo has been "the capital ', 'since 1814" ', "[call_AbC]."]
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    calls, answer = [_recorded_chunks(run, turn) for turn in _turns(run)]
    assert [json.loads(c)["event_kind"] for c in calls] == ["part_start", "part_delta", "part_end"]
    assert [json.loads(c)["event_kind"] for c in answer] == [
        "part_start",
        "final_result",
        "part_delta",
        "part_delta",
        "part_end",
    ]
    # the response evidence is the assembled ModelResponse, as a whole turn's
    first = _turns(run)[0]
    response = json.loads(RunEvidence.open(run).read(first["response"]))
    (part,) = response["parts"]
    assert (part["tool_call_id"], part["args"]) == ("call_AbC", '{"city": "Oslo"}')

    replayed: list[int] = []
    texts_again: list[str] = []
    replay = asyncio.run(toolproof.replay_session(run, _pai_agent(replayed, [], texts_again)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    assert replayed == []  # the model was never asked
    assert texts_again == texts  # the same deltas
    assert asyncio.run(replay_run(run)).identical is True


def test_pydantic_ai_streamed_events_replay_byte_for_byte_in_their_chunks(tmp_path: Path) -> None:
    asked: list[int] = []
    seen: list[bytes] = []
    run = _record(tmp_path, _pai_iter_agent(asked, seen))
    assert asked == [0, 1]
    _check(run, seen, "pydantic-ai")
    replayed: list[int] = []
    seen_again: list[bytes] = []
    replay = asyncio.run(toolproof.replay_session(run, _pai_iter_agent(replayed, seen_again)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    assert replayed == []
    assert seen_again == seen  # byte for byte, in the same chunks
    shown = toolproof_cli("show", str(run))
    assert shown.returncode == 0, shown.stderr
    turns = [line for line in shown.stdout.splitlines() if line.startswith("model turn ")]
    assert [line.split(", ")[-1] for line in turns] == [
        "streamed in 3 chunks)",
        "streamed in 5 chunks)",
    ]


def test_a_streamed_pydantic_ai_turn_replays_whole_and_a_whole_one_as_a_stream(
    tmp_path: Path,
) -> None:
    run = _record(tmp_path, _pai_agent([], [], []))

    async def whole(session: Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(_pai_stream([])), toolsets=[session.pydantic_ai_toolset()]
        )
        session.answer((await runner.run("Capital?")).output)

    replay = asyncio.run(toolproof.replay_session(run, whole))
    assert (replay.identical, replay.turns, replay.live_calls) == (True, 2, 0)
    # recorded whole, asked as a stream: one chunk per part (pydantic-ai's own replay)
    whole_run = _record(tmp_path / "whole", whole)
    texts: list[str] = []
    replay = asyncio.run(toolproof.replay_session(whole_run, _pai_agent([], [], texts)))
    assert (replay.identical, replay.turns, texts) == (True, 2, [ANSWER])


# -- the OpenAI Agents SDK --------------------------------------------------------------------


def _scripted() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"city": "Oslo"}, call_id="call_AbC")]),
            ModelStep(output=[assistant_message(ANSWER)]),
        ]
    )


def _agents_agent(
    models: list[ScriptedModel], seen: list[bytes], streamed: bool = True
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        model = _scripted()
        models.append(model)
        runner = AgentsAgent(
            name="capital",
            instructions="Answer quoting the tool.",
            model=session.openai_agents_model(model),
            tools=session.openai_agents_tools(),
        )
        config = RunConfig(tracing_disabled=True)
        if not streamed:
            session.answer(
                str((await Runner.run(runner, "Capital?", run_config=config)).final_output)
            )
            return
        result = Runner.run_streamed(runner, "Capital?", run_config=config)
        async for event in result.stream_events():
            if isinstance(event, RawResponsesStreamEvent):
                seen.append(openai_agents_model.stream_event_bytes(event.data))
        session.answer(str(result.final_output))

    return agent


def test_agents_sdk_run_streamed_is_recorded_and_replayed_in_its_chunks(tmp_path: Path) -> None:
    models: list[ScriptedModel] = []
    seen: list[bytes] = []
    run = _record(tmp_path, _agents_agent(models, seen))
    assert len(models[0].calls) == 2
    calls, answer = _check(run, seen, "openai-agents")
    kinds = [json.loads(c)["type"] for c in answer]
    assert (kinds[0], kinds[-1]) == ("response.created", "response.completed")
    assert "response.output_text.delta" in kinds
    # the response evidence is the assembled response, as a whole turn's
    first = _turns(run)[0]
    response = json.loads(RunEvidence.open(run).read(first["response"]))
    assert [(i["type"], i["call_id"]) for i in response["output"]] == [
        ("function_call", "call_AbC")
    ]
    assert response["response_id"] == json.loads(calls[-1])["response"]["id"]

    models_again: list[ScriptedModel] = []
    seen_again: list[bytes] = []
    replay = asyncio.run(toolproof.replay_session(run, _agents_agent(models_again, seen_again)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    assert models_again[0].calls == ()  # the model was never asked
    assert seen_again == seen  # byte for byte, in the same chunks
    assert asyncio.run(replay_run(run)).identical is True
    # a streamed turn asked whole is served its assembled response
    replay = asyncio.run(toolproof.replay_session(run, _agents_agent([], [], streamed=False)))
    assert (replay.identical, replay.turns, replay.live_calls) == (True, 2, 0)


def test_an_agents_sdk_turn_recorded_whole_is_refused_as_a_stream(tmp_path: Path) -> None:
    run = _record(tmp_path, _agents_agent([], [], streamed=False))
    with pytest.raises(InputError) as refused:
        asyncio.run(toolproof.replay_session(run, _agents_agent([], [])))
    assert refused.value.message.startswith(
        "this openai-agents model turn was recorded whole (Runner.run), so it has no stream "
        "to replay: replay it with Runner.run, or record the run again with Runner.run_streamed"
    )
