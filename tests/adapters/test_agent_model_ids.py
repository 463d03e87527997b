"""The id a model gives each tool call: recorded on ``tool_called``, linked to its turn, citable.

Each framework's real loop (pydantic-ai ``FunctionModel``, the Agents SDK's ``Runner.run``
with a scripted ``Model``, LangChain's ``create_agent`` with its fake chat model, and
pydantic-ai's OpenAI chat model through ``session.httpx_transport()`` against a local
OpenAI-compatible endpoint): the stored id is the one the model emitted, the stored turn
is the recorded turn whose response holds it, and an answer citing that id validates.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from agents import Agent as AgentsAgent
from agents import Model, ModelResponse, RunConfig, Runner, Usage
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ToolCallPart, ToolReturnPart
from pydantic_ai.messages import ModelResponse as PaiResponse
from pydantic_ai.messages import TextPart as PaiText
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import toolproof
from toolproof import Session, Tool, Toolset
from toolproof.adapters.cli.timeline import timeline_view
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "runs"))
from agent_support import AgentCode, record_agent
from llm_support import Reply, chat_reply, scripted_model

SENTENCE = "Oslo has been the capital since 1814."
CAPITALS = {"Norway": SENTENCE + " Before that it was Copenhagen's."}


def _toolset() -> Toolset:
    async def capital(country: str) -> str:
        """The capital of a country, and since when."""
        return CAPITALS.get(country, "unknown")

    toolset = Toolset()
    toolset.add(Tool.from_function(capital))
    return toolset.seal()


def _record(root: Path, agent: AgentCode) -> Path:
    return record_agent(_toolset(), root, "Capital?", agent)


def _events(run: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    return [event for event in map(json.loads, lines) if event["type"] == kind]


def _claim(run: Path) -> dict[str, Any]:
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert isinstance(claim, dict)
    return claim


def _pydantic_ai_agent(emitted: list[str], *, recorded_model: bool) -> AgentCode:
    """Turn 1 asks ``capital`` (pydantic-ai makes the id); turn 2 cites the id it saw."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        returned = [
            part
            for message in messages
            for part in getattr(message, "parts", [])
            if isinstance(part, ToolReturnPart)
        ]
        if not returned:
            call = ToolCallPart("capital", {"country": "Norway"})  # id: pyd_ai_<hex>
            emitted.append(call.tool_call_id)
            return PaiResponse(parts=[call])
        return PaiResponse(parts=[PaiText(f'"{SENTENCE}" [{returned[0].tool_call_id}]')])

    async def agent(session: Session) -> None:
        model: Any = FunctionModel(respond)
        if recorded_model:
            model = session.pydantic_ai_model(model)
        runner = Agent(model, toolsets=[session.pydantic_ai_toolset()])
        session.answer((await runner.run("What is the capital of Norway?")).output)

    return agent


def test_pydantic_ai_stores_the_tool_call_id_and_its_turn_and_a_citation_by_it_validates(
    tmp_path: Path,
) -> None:
    emitted: list[str] = []
    run = _record(tmp_path, _pydantic_ai_agent(emitted, recorded_model=True))
    assert verify_run(run).ok, [str(f) for f in verify_run(run).failures]
    (called,) = _events(run, "tool_called")
    (model_id,) = emitted
    assert model_id.startswith("pyd_ai_")
    assert (called["model_call_id"], called["model_turn"]) == (model_id, "turn-00000001")
    assert "model_call_id" not in called["call"]  # the call's content id is not changed
    claim = _claim(run)
    assert (claim["statement"], claim["status"]) == (f'"{SENTENCE}" [{model_id}]', "validated")
    assert [c["text"] for c in claim["citations"]] == [SENTENCE]
    # the served turn carries the recorded id: the replayed answer is the recorded one
    replayed: list[str] = []
    replay = asyncio.run(
        toolproof.replay_session(
            run, _pydantic_ai_agent(replayed, recorded_model=True), toolset=_toolset()
        )
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    assert replayed == []  # the model was not asked again
    # re-executed frozen, the trace (model links included) is the recorded one
    assert asyncio.run(replay_run(run)).identical is True


def test_an_unrecorded_model_still_gives_the_id_but_no_turn(tmp_path: Path) -> None:
    emitted: list[str] = []
    run = _record(tmp_path, _pydantic_ai_agent(emitted, recorded_model=False))
    (called,) = _events(run, "tool_called")
    assert called["model_call_id"] == emitted[0]
    assert "model_turn" not in called
    assert _claim(run)["status"] == "validated"
    assert verify_run(run).ok


class _AgentsModel(Model):
    """The Agents SDK's ``Model`` interface: one ``function_call``, then an answer citing it."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = input if isinstance(input, list) else []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                name="capital",
                call_id="call_AbC123xYz",
                arguments=json.dumps({"country": "Norway"}),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = f'"{SENTENCE}" [{outputs[0]["call_id"]}]'
        message = ResponseOutputMessage(
            id="m1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


async def _agents_agent(session: Session) -> None:
    runner = AgentsAgent(
        name="capitals",
        model=session.openai_agents_model(_AgentsModel()),
        tools=session.openai_agents_tools(),
    )
    config = RunConfig(tracing_disabled=True)
    result = await Runner.run(runner, "What is the capital of Norway?", run_config=config)
    session.answer(str(result.final_output))


def test_the_agents_sdk_stores_the_call_id_and_its_turn_and_a_citation_by_it_validates(
    tmp_path: Path,
) -> None:
    run = _record(tmp_path, _agents_agent)
    assert verify_run(run).ok, [str(f) for f in verify_run(run).failures]
    (called,) = _events(run, "tool_called")
    assert (called["model_call_id"], called["model_turn"]) == ("call_AbC123xYz", "turn-00000001")
    claim = _claim(run)
    assert claim["statement"] == f'"{SENTENCE}" [call_AbC123xYz]'
    assert claim["status"] == "validated"
    replay = asyncio.run(toolproof.replay_session(run, _agents_agent, toolset=_toolset()))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)


class _FakeChat(GenericFakeChatModel):
    """LangChain's scripted chat model; the agent binds tools, the script decides."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self


def _langchain_agent(ids: Sequence[str], cited: str) -> AgentCode:
    def script() -> Iterator[BaseMessage]:
        calls = [
            {"name": "capital", "args": {"country": "Norway"}, "id": one, "type": "tool_call"}
            for one in ids
        ]
        yield AIMessage(content="", tool_calls=calls)
        yield AIMessage(content=f'"{SENTENCE}" [{cited}]')

    async def agent(session: Session) -> None:
        graph = create_agent(_FakeChat(messages=script()), session.langchain_tools())
        state = await graph.ainvoke({"messages": [("user", "What is the capital of Norway?")]})
        session.answer(str(state["messages"][-1].content))

    return agent


def test_langchain_stores_the_tool_call_id_and_a_citation_by_it_validates(tmp_path: Path) -> None:
    run = _record(tmp_path, _langchain_agent(["toolu_01Xy9"], "toolu_01Xy9"))
    assert verify_run(run).ok, [str(f) for f in verify_run(run).failures]
    (called,) = _events(run, "tool_called")
    assert called["model_call_id"] == "toolu_01Xy9"
    assert "model_turn" not in called  # LangChain's own model turns are not recorded
    assert _claim(run)["status"] == "validated"
    replay = asyncio.run(
        toolproof.replay_session(
            run, _langchain_agent(["toolu_01Xy9"], "toolu_01Xy9"), toolset=_toolset()
        )
    )
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 1, 0)


def test_an_id_the_model_gave_two_calls_is_refused_naming_both(tmp_path: Path) -> None:
    run = _record(tmp_path, _langchain_agent(["t1", "t1"], "t1"))
    assert [e["model_call_id"] for e in _events(run, "tool_called")] == ["t1", "t1"]
    claim = _claim(run)
    assert (claim["type"], claim["status"]) == ("derived", "unvalidated")
    assert claim["reason"] == (
        f"quote {SENTENCE!r}: citation [t1] names 2 different calls: call_1 (step "
        "call-00000001) and call_2 (step call-00000002); cite one of them by its call_N"
    )
    verification = verify_run(run)
    assert not verification.ok
    assert any("citation [t1] names 2 different calls" in str(f) for f in verification.failures)


def test_a_model_id_that_reads_as_another_calls_number_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    # the first call's model id is "call_2", toolproof's name of the second call
    run = _record(tmp_path, _langchain_agent(["call_2", "t9"], "call_2"))
    assert _claim(run)["reason"] == (
        f"quote {SENTENCE!r}: citation [call_2] names 2 different calls: call_2 (step "
        "call-00000002) and call_1 (step call-00000001); cite one of them by its call_N"
    )


def test_toolproofs_own_numbering_still_cites_beside_the_model_ids(tmp_path: Path) -> None:
    run = _record(tmp_path, _langchain_agent(["t1", "t2"], "call_2"))
    assert _claim(run)["status"] == "validated"


def _tool_call_reply(call_id: str) -> Reply:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "capital", "arguments": json.dumps({"country": "Norway"})},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return Reply(body=json.dumps(body).encode())


def _http_agent(base_url: str) -> AgentCode:
    async def agent(session: Session) -> None:
        async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
            client = AsyncOpenAI(base_url=base_url, api_key="none", http_client=http, max_retries=0)
            provider = OpenAIProvider(openai_client=client)
            model = OpenAIChatModel("scripted", provider=provider)
            runner = Agent(model, toolsets=[session.pydantic_ai_toolset()])
            session.answer((await runner.run("What is the capital of Norway?")).output)

    return agent


def test_an_openai_compatible_tool_call_id_through_the_http_transport(tmp_path: Path) -> None:
    answer = chat_reply(f'"{SENTENCE}" [call_Q7fKz2]')
    with scripted_model(_tool_call_reply("call_Q7fKz2"), answer) as server:
        run = _record(tmp_path, _http_agent(server.base_url))
        sent = list(server.requests)
    assert len(sent) == 2
    assert sent[1]["body"]["messages"][-1]["tool_call_id"] == "call_Q7fKz2"
    assert verify_run(run).ok, [str(f) for f in verify_run(run).failures]
    (called,) = _events(run, "tool_called")
    assert (called["model_call_id"], called["model_turn"]) == ("call_Q7fKz2", "turn-00000001")
    assert _claim(run)["status"] == "validated"
    # the server is gone: the replay serves both exchanges and the recorded ids
    replay = asyncio.run(
        toolproof.replay_session(run, _http_agent(server.base_url), toolset=_toolset())
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    entries = timeline_view(run, [json.loads(line) for line in lines])
    (call,) = [entry for entry in entries if entry["kind"] == "call"]
    assert (call["call"], call["model_call_id"], call["model_turn"]) == (
        "call_1",
        "call_Q7fKz2",
        "turn-00000001",
    )
