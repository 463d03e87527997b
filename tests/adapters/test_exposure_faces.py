"""No path around a gate: each face tries every name, and only the exposed ones answer.

The Toolset (``exposure_support``) holds ``delete_branch`` with the variants
``delete_branch_approve``, ``delete_branch_timeout`` and ``delete_branch_timeout_approve``,
and ``list_branches``. The ungated ``delete_branch`` and ``delete_branch_timeout`` must not
be reachable through MCP, the session adapters (pydantic-ai, the Agents SDK, LangChain)
or a run spec; every body run is counted.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent as OpenAIAgent
from agents import Model, ModelResponse, RunConfig, Runner, Usage
from approval_support import write_gated_root
from cli_support import toolproof as cli
from exposure_support import EVERY, EXPOSED, HIDDEN, arguments_of, gated_toolset
from mcp import Client
from mcp.shared.exceptions import MCPError
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof.adapters.cli.serve import _count
from toolproof.adapters.http import ApiSettings, create_app
from toolproof.adapters.mcp.server import build_server
from toolproof.adapters.session_runs import AgentReplay
from toolproof.contract.runs import RunSpec
from toolproof.errors import InputError
from toolproof.runs.run import execute_run
from toolproof.tools.exposure import Exposure

UNKNOWN = "no such tool in this toolset (known: {})"


def _bodies_of(names: list[str]) -> list[str]:
    return sorted(
        "list_branches:" if name == "list_branches" else "delete_branch:feature" for name in names
    )


def test_mcp_lists_and_calls_only_the_exposed_names() -> None:
    bodies: list[str] = []

    async def scenario() -> tuple[list[str], dict[str, Any]]:
        async with Client(build_server(gated_toolset(bodies))) as client:
            listed = sorted(tool.name for tool in (await client.list_tools()).tools)
            answers: dict[str, Any] = {}
            for name in EVERY:
                try:
                    result = await client.call_tool(name, arguments_of(name))
                    answers[name] = result.structured_content
                except MCPError as exc:
                    answers[name] = (exc.error.code, exc.error.message)
            return listed, answers

    listed, answers = asyncio.run(scenario())
    assert listed == EXPOSED
    refusal = (-32602, f"tool name {{}}: {UNKNOWN.format(', '.join(EXPOSED))}")
    assert answers == {
        "delete_branch": (refusal[0], refusal[1].format("'delete_branch'")),
        "delete_branch_approve": {"result": "deleted feature"},
        "delete_branch_timeout": (refusal[0], refusal[1].format("'delete_branch_timeout'")),
        "delete_branch_timeout_approve": {"result": "deleted feature"},
        "list_branches": {"result": ["main"]},
    }
    assert sorted(bodies) == _bodies_of(EXPOSED)


def test_expose_and_hide_change_what_mcp_lists() -> None:
    policy = Exposure(expose=("delete_branch_timeout",), hide=("list_*",))

    async def scenario() -> list[str]:
        async with Client(build_server(gated_toolset([], policy))) as client:
            return sorted(tool.name for tool in (await client.list_tools()).tools)

    assert asyncio.run(scenario()) == [
        "delete_branch_approve",
        "delete_branch_timeout",
        "delete_branch_timeout_approve",
    ]


def test_a_session_hands_out_and_calls_only_the_exposed_names(tmp_path: Path) -> None:
    bodies: list[str] = []

    async def scenario() -> tuple[list[str], dict[str, Any], list[str], list[str]]:
        async with toolproof.record_session(
            gated_toolset(bodies), root=tmp_path, task="delete a branch"
        ) as session:
            names = sorted(session.toolset)
            answers = {}
            for name in EVERY:
                result = await session.call(name, arguments_of(name))
                answers[name] = result.value if result.ok else result.failure
            langchain = sorted(tool.name for tool in session.langchain_tools())
            agents = sorted(tool.name for tool in session.openai_agents_tools())
            session.answer("done")
        return names, answers, langchain, agents

    names, answers, langchain, agents = asyncio.run(scenario())
    assert names == langchain == agents == EXPOSED
    for name in HIDDEN:
        failure = answers.pop(name)
        assert (failure.kind, failure.message) == (
            "unknown_tool",
            f"no tool {name!r} in this session (known: {', '.join(EXPOSED)})",
        )
    assert answers == {
        "delete_branch_approve": "deleted feature",
        "delete_branch_timeout_approve": "deleted feature",
        "list_branches": ["main"],
    }
    assert sorted(bodies) == _bodies_of(EXPOSED)


def test_a_pydantic_ai_agent_sees_only_the_exposed_names(tmp_path: Path) -> None:
    bodies: list[str] = []
    seen: list[list[str]] = []
    replies: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        seen.append(sorted(tool.name for tool in info.function_tools))
        if len(messages) == 1:
            calls = [
                ToolCallPart(name, arguments_of(name), tool_call_id=f"c{n}")
                for n, name in enumerate(EVERY)
            ]
            return PydanticResponse(parts=calls)
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        replies.extend(last.parts)
        return PydanticResponse(parts=[TextPart("done")])

    async def scenario() -> None:
        async with toolproof.record_session(
            gated_toolset(bodies), root=tmp_path, task="delete a branch"
        ) as session:
            agent = Agent(FunctionModel(respond), toolsets=[session.pydantic_ai_toolset()])
            session.answer((await agent.run("Delete feature.")).output)

    asyncio.run(scenario())
    assert seen == [EXPOSED, EXPOSED]
    returned = {p.tool_name: p.content for p in replies if isinstance(p, ToolReturnPart)}
    available = ", ".join(repr(name) for name in EXPOSED)
    assert returned == {  # pydantic-ai's own answer to a name it was not given: nothing ran
        "delete_branch": f"Unknown tool name: 'delete_branch'. Available tools: {available}",
        "delete_branch_approve": "deleted feature",
        "delete_branch_timeout": (
            f"Unknown tool name: 'delete_branch_timeout'. Available tools: {available}"
        ),
        "delete_branch_timeout_approve": "deleted feature",
        "list_branches": ["main"],
    }
    assert not [p for p in replies if isinstance(p, RetryPromptPart)]
    assert sorted(bodies) == _bodies_of(EXPOSED)


class _EveryExposed(Model):
    """An Agents SDK ``Model``: calls every tool it is given, then answers."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        tools = kwargs["tools"] if "tools" in kwargs else args[1]
        self.offered.append(sorted(tool.name for tool in tools))
        answered = isinstance(input, list) and any(
            isinstance(item, dict) and item.get("type") == "function_call_output" for item in input
        )
        output: list[Any]
        if not answered:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name=tool.name,
                    call_id=f"c{n}",
                    id=f"f{n}",
                    arguments=json.dumps(arguments_of(tool.name)),
                )
                for n, tool in enumerate(tools)
            ]
        else:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m1", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_an_agents_sdk_run_is_offered_only_the_exposed_names(tmp_path: Path) -> None:
    bodies: list[str] = []
    model = _EveryExposed()

    async def scenario() -> None:
        async with toolproof.record_session(
            gated_toolset(bodies), root=tmp_path, task="delete a branch"
        ) as session:
            agent = OpenAIAgent(name="a", tools=session.openai_agents_tools(), model=model)
            result = await Runner.run(
                agent, "Delete feature.", run_config=RunConfig(tracing_disabled=True)
            )
            session.answer(str(result.final_output))

    asyncio.run(scenario())
    assert model.offered == [EXPOSED, EXPOSED]
    assert sorted(bodies) == _bodies_of(EXPOSED)


def test_a_run_spec_calling_a_hidden_tool_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    bodies: list[str] = []
    toolset = gated_toolset(bodies)
    for name in HIDDEN:
        spec = RunSpec.model_validate(
            {"task": "t", "steps": [{"id": "s", "tool": name, "arguments": arguments_of(name)}]}
        )
        with pytest.raises(InputError) as caught:
            asyncio.run(execute_run(spec, root=tmp_path, toolset=toolset))
        assert caught.value.message == (
            f"step 's' calls tool {name!r}, which this toolset does not expose (an ungated "
            "sibling of an approve-gated variant: call the gated variant or name it in "
            "[serve] expose; or hidden by [serve] hide)"
        )
        assert caught.value.fields["rule"] == "exposure"
    assert bodies == []
    assert not (tmp_path / "runs").exists()
    for name in EXPOSED:
        spec = RunSpec.model_validate(
            {"task": "t", "steps": [{"id": "s", "tool": name, "arguments": arguments_of(name)}]}
        )
        outcome = asyncio.run(execute_run(spec, root=tmp_path, toolset=toolset))
        assert outcome.live_calls == 1
    assert sorted(bodies) == _bodies_of(EXPOSED)


MODULE = '''
import toolproof
from toolproof.adapters.session_runs import AgentReplay
from toolproof.adapters.cli.serve import _count

@toolproof.tool
def debug_dump() -> str:
    """Dump state."""
    return "state"

@toolproof.tool
def status() -> str:
    """Report status."""
    return "ok"
'''


def test_serve_api_refuses_a_spec_calling_a_hidden_tool(tmp_path: Path) -> None:
    (tmp_path / "tp_exposure_api_tools.py").write_text(MODULE, encoding="utf-8")
    config = """
        [[python]]
        module = "tp_exposure_api_tools"

        [serve]
        hide = ["debug_*"]
    """
    (tmp_path / "toolproof.toml").write_text(textwrap.dedent(config), encoding="utf-8")
    settings = ApiSettings(root=tmp_path, token="exposure-token-0123456789")
    auth = {"Authorization": "Bearer exposure-token-0123456789"}

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(settings))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=auth
        ) as client:
            return [
                await client.post(
                    "/v1/runs", json={"spec": {"task": "t", "steps": [{"id": "s", "tool": t}]}}
                )
                for t in ("debug_dump", "status")
            ]

    hidden, shown = asyncio.run(scenario())
    assert hidden.status_code == 422, hidden.text
    assert hidden.json()["message"].startswith(
        "step 's' calls tool 'debug_dump', which this toolset does not expose"
    )
    assert shown.status_code == 201, shown.text
    assert shown.json()["tool_calls"] == 1


def test_a_frozen_replay_without_the_toolset_offers_only_the_recorded_exposed_names(
    tmp_path: Path,
) -> None:
    async def agent(session: toolproof.Session) -> None:
        assert sorted(session.toolset) == EXPOSED
        await session.call("list_branches", {})
        session.answer("done")

    async def scenario() -> AgentReplay:
        async with toolproof.record_session(
            gated_toolset([]), root=tmp_path, task="list"
        ) as session:
            await agent(session)
        assert session.run_id is not None
        return await toolproof.replay_session(tmp_path / "runs" / session.run_id, agent)

    replayed = asyncio.run(scenario())
    assert (replayed.identical, replayed.calls, replayed.live_calls) == (True, 1, 0)


def test_the_built_in_approve_gate_hides_its_base_unless_expose_names_it(tmp_path: Path) -> None:
    async def load(config: Path) -> tuple[dict[str, str], list[str], Any]:
        async with toolproof.load_toolset(config) as toolset:
            exposed = [tool.name for tool in toolset.exposed()]
            return toolset.hidden(), exposed, toolset.descriptor().exposure

    hidden, exposed, record = asyncio.run(load(write_gated_root(tmp_path / "a")))
    assert hidden == {
        "delete_branch": (
            "ungated: delete_branch_approve gates delete_branch "
            "(name it in [serve] expose to show it)"
        )
    }
    assert exposed == ["delete_branch_approve", "list_branches"]
    assert (record.expose, record.hide, record.hidden) == ([], [], ["delete_branch"])
    opened = write_gated_root(tmp_path / "b", serve='\n[serve]\nexpose = ["delete_branch"]\n')
    hidden, exposed, record = asyncio.run(load(opened))
    assert (hidden, exposed) == ({}, ["delete_branch", "delete_branch_approve", "list_branches"])
    assert (record.expose, record.hidden) == (["delete_branch"], [])


def test_serve_announces_what_it_hides() -> None:
    assert _count(gated_toolset([])) == "3 tools (2 hidden: delete_branch, delete_branch_timeout)"
    assert _count(gated_toolset([], Exposure(expose=("*",)))) == "5 tools"


def test_serve_announces_one_tool_in_the_singular() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    single = toolproof.Toolset()
    single.add(toolproof.Tool.from_function(shout))
    single.seal()
    assert _count(single) == "1 tool"


def test_tools_list_names_what_the_faces_hide(tmp_path: Path) -> None:
    config = write_gated_root(tmp_path)
    command = ["tools", "list", "--config", str(config)]
    listed = cli(*command, "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert [tool["name"] for tool in document["tools"]] == [
        "delete_branch",
        "delete_branch_approve",
        "list_branches",
    ]
    assert document["hidden"] == [
        {
            "name": "delete_branch",
            "reason": "ungated: delete_branch_approve gates delete_branch "
            "(name it in [serve] expose to show it)",
        }
    ]
    table = cli(*command)
    assert "hidden from serve, sessions and run specs" in table.stdout
