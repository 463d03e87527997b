"""A served tool asks the client's roots, names its questions, and adapts to capabilities.

The tools (a ``[[python]]`` module written to ``tmp_path``) are called by the official
SDK's ``mcp.Client`` through :func:`build_server` (what ``toolproof serve`` runs):

* ``Context.list_roots`` is a ``roots/list`` request over 2025-11-25 (the SDK's
  ``legacy`` mode) and a round over 2026-07-28; a client that declared no roots makes
  it fail with kind ``unavailable``;
* ``key=`` names a question in the round's ``inputRequests``;
* a body that catches the refusal of an undeclared capability and answers anyway gets
  its answer through (the -32021 error is for a call that failed for it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server

MODULE = '''
import asyncio

import toolproof
from toolproof import Context, ToolCallError

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@toolproof.tool
async def roots(ctx: Context) -> list[str]:
    """The client's root URIs."""
    return [root["uri"] for root in await ctx.list_roots()]


@toolproof.tool
async def named(ctx: Context) -> str:
    """Asks a name under the key user_name."""
    answer = await ctx.elicit("Your name?", NAME, key="user_name")
    return f"Hello, {answer['content']['name']}!"


async def _or_none(question):
    try:
        return await question
    except ToolCallError as refused:
        return refused.failure.kind


@toolproof.tool
async def adapts(ctx: Context) -> str:
    """Asks a name and the model at once; whatever the client cannot answer is skipped."""
    name, poem = await asyncio.gather(
        _or_none(ctx.elicit("Your name?", NAME)), _or_none(ctx.sample("A word", max_tokens=5))
    )
    return f"name={name if isinstance(name, str) else 'asked'} poem={poem['content']['text']}"
'''
ROOTS = types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])
WORD = types.CreateMessageResult(
    role="assistant", content=types.TextContent(text="pond"), model="m"
)


def config(tmp_path: Path) -> Path:
    (tmp_path / "roots_tools.py").write_text(MODULE, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text('[[python]]\nmodule = "roots_tools"\n', encoding="utf-8")
    return path


async def list_roots(context: Any) -> types.ListRootsResult:
    return ROOTS


async def elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(context: Any, params: Any) -> types.CreateMessageResult:
    return WORD


def call(tmp_path: Path, mode: str, tool: str, **callbacks: Any) -> types.CallToolResult:
    async def main() -> types.CallToolResult:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(build_server(toolset), mode=mode, **callbacks) as client,  # type: ignore[arg-type]
        ):
            return await client.call_tool(tool, {})

    return asyncio.run(main())


def test_list_roots_is_a_request_on_2025_and_a_round_on_2026(tmp_path: Path) -> None:
    for mode in ("legacy", "2026-07-28"):
        result = call(tmp_path, mode, "roots", list_roots_callback=list_roots)
        assert (result.is_error, result.structured_content) == (
            False,
            {"result": ["file:///work"]},
        ), mode


def test_a_client_without_roots_fails_the_call_as_unavailable(tmp_path: Path) -> None:
    result = call(tmp_path, "legacy", "roots")
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == (
        "unavailable: the client did not declare the capability roots/list needs"
    )


def test_a_question_key_names_the_input_request(tmp_path: Path) -> None:
    async def main() -> list[str]:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(build_server(toolset), mode="2026-07-28", elicitation_callback=elicit) as client,
        ):
            first = await client.session.call_tool("named", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            return sorted(first.input_requests or {})

    assert asyncio.run(main()) == ["user_name"]


def test_a_body_that_skips_an_undeclared_capability_answers(tmp_path: Path) -> None:
    # the client declares sampling only: the elicitation is refused inside the body,
    # which goes on with the sampling round and answers (no -32021)
    result = call(tmp_path, "2026-07-28", "adapts", sampling_callback=sample)
    assert (result.is_error, result.structured_content) == (
        False,
        {"result": "name=unavailable poem=pond"},
    )
