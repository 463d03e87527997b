"""Agents of the three frameworks whose model sees the tools, for the self-contained replay tests.

Each agent's scripted model answers the same way live and frozen (fixed tool call ids),
so a run recorded with :func:`record` replays with ``replay_session(run, agent)`` when
the tools the replay presents are the recorded ones. ``tests/fixtures/agent_runs_v0``
holds runs these agents recorded before a run stored its tools
(``python tests/fixtures/agent_runs_v0/record.py``, at that commit).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from agent_support import AgentCode
from agents import Agent as AgentsAgent
from agents import Model, ModelResponse, RunConfig, Runner, Usage
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from llm_support import Reply, chat_reply, tool_call_reply
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
from pydantic_ai.messages import ModelResponse as PaiResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof

FILES = {"README.md": "toolproof records every tool call.\nCreated by Ada."}
ANSWER = 'README.md says it was "Created by Ada" [a].'


def toolset(description: str = "Read a file of the repository.") -> toolproof.Toolset:
    """``read_file(path: str)`` with ``description``, and ``lookup(item: str)``."""

    async def read_file(path: str) -> str:
        return FILES.get(path, "")

    read_file.__doc__ = description

    async def lookup(item: str) -> dict[str, Any]:
        """Look an item up."""
        return {"item": item, "count": len(item)}

    tools = toolproof.Toolset()
    tools.add(toolproof.Tool.from_function(read_file))
    tools.add(toolproof.Tool.from_function(lookup))
    return tools.seal()


def record(source: toolproof.Toolset | Path, root: Path, agent: AgentCode) -> Path:
    """Record ``agent`` over ``source`` under ``root``; the run's folder."""

    async def go() -> str:
        async with toolproof.record_session(source, root=root, task="Who?") as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    return root / "runs" / asyncio.run(go())


def pydantic_ai_agent(prompt: str = "Who created README.md?") -> AgentCode:
    """A pydantic-ai agent whose model turns are recorded (each request holds the tools)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        if not any(isinstance(m, PaiResponse) for m in messages):
            call = ToolCallPart("read_file", {"path": "README.md"}, tool_call_id="a")
            return PaiResponse(parts=[call])
        return PaiResponse(parts=[TextPart(ANSWER)])

    async def agent(session: toolproof.Session) -> None:
        model = session.pydantic_ai_model(FunctionModel(respond))
        runner = Agent(model, toolsets=[session.pydantic_ai_toolset()])
        session.answer((await runner.run(prompt)).output)

    return agent


class ScriptedAgentsModel(Model):
    """An Agents SDK ``Model``: one call of ``read_file``, then the answer."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        answered = isinstance(input, list) and any(
            isinstance(item, dict) and item.get("type") == "function_call_output" for item in input
        )
        output: list[Any]
        if not answered:
            arguments = json.dumps({"path": "README.md"})
            output = [
                ResponseFunctionToolCall(
                    type="function_call", name="read_file", call_id="a", arguments=arguments
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=ANSWER, annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m1", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def openai_agents_agent() -> AgentCode:
    """An Agents SDK agent whose model turns are recorded (each request holds the tools)."""

    async def agent(session: toolproof.Session) -> None:
        runner = AgentsAgent(
            name="reader",
            model=session.openai_agents_model(ScriptedAgentsModel()),
            tools=session.openai_agents_tools(),
        )
        config = RunConfig(tracing_disabled=True)
        result = await Runner.run(runner, "Who created README.md?", run_config=config)
        session.answer(str(result.final_output))

    return agent


def langchain_agent(bound: list[dict[str, Any]] | None = None) -> AgentCode:
    """A LangChain v1 ``create_agent`` loop; ``bound`` gains the tools as OpenAI would get them."""
    kept = [] if bound is None else bound

    class BindingFake(GenericFakeChatModel):  # LangChain's scripted chat model
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            kept.extend(convert_to_openai_tool(tool) for tool in tools)
            return self

    async def agent(session: toolproof.Session) -> None:
        call = {"name": "read_file", "args": {"path": "README.md"}, "id": "a", "type": "tool_call"}
        script = iter([AIMessage(content="", tool_calls=[call]), AIMessage(content=ANSWER)])
        graph = create_agent(BindingFake(messages=script), session.langchain_tools())
        state = await graph.ainvoke({"messages": [("user", "Who created README.md?")]})
        session.answer(str(state["messages"][-1].content))

    return agent


HTTP_CALL_ID = "call_readme"
"""The id the scripted OpenAI-compatible endpoint gives its one tool call."""
HTTP_ANSWER = f'README.md says it was "Created by Ada" [{HTTP_CALL_ID}].'


def http_replies() -> list[Reply]:
    """What the scripted endpoint answers a LangChain agent: a ``read_file`` call, the answer."""
    return [
        tool_call_reply(HTTP_CALL_ID, "read_file", {"path": "README.md"}),
        chat_reply(HTTP_ANSWER),
    ]


def langchain_http_agent(base_url: str, prompt: str = "Who created README.md?") -> AgentCode:
    """A LangChain v1 agent on ``ChatOpenAI``, its model turns recorded by the HTTP transport.

    LangChain has no model recorder of its own: ``ChatOpenAI``'s ``openai`` client sends
    each turn through ``session.httpx_transport()``, which records it (live) or serves
    it (frozen, reaching no server).
    """

    async def agent(session: toolproof.Session) -> None:
        async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
            model = ChatOpenAI(
                model="scripted",
                base_url=base_url,
                api_key="none",  # type: ignore[arg-type]
                http_async_client=http,
                max_retries=0,
            )
            graph = create_agent(model, session.langchain_tools())
            state = await graph.ainvoke({"messages": [("user", prompt)]})
        session.answer(str(state["messages"][-1].content))

    return agent
