"""Optional MCP methods a server lacks are skipped; failures name the method; no false warnings.

The servers here are real stdio MCP servers built on the official SDK's low-level
``Server`` (written to a temporary file by the test): they announce ``resources`` and
``prompts`` but answer one optional listing with JSON-RPC ``-32601`` (method not
found), as ``mcp-server-duckdb`` does for ``resources/templates/list`` — or answer it
with another error, which does refuse the server, naming the method.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from toolproof import load_toolset
from toolproof.tools.resources import MCP_LIVE, MCP_SERVERS

SERVER = """
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

BROKEN, CODE = sys.argv[1], int(sys.argv[2])
listed = 0


def lacking(method, answer):
    async def handler(ctx, params):
        if method == BROKEN:
            raise MCPError(CODE, "Method not found" if CODE == -32601 else "disk on fire")
        return answer

    return handler


async def list_tools(ctx, params):
    global listed
    listed += 1
    if listed == 1:  # while starting, as some servers do
        await ctx.session.send_tool_list_changed()
    tool = types.Tool(name="query", description="q", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="answered")])


server = Server(
    "lacking",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=lacking("resources/list", types.ListResourcesResult(resources=[])),
    on_list_resource_templates=lacking(
        "resources/templates/list", types.ListResourceTemplatesResult(resource_templates=[])
    ),
    on_list_prompts=lacking("prompts/list", types.ListPromptsResult(prompts=[])),
)


async def main():  # a 2025-11-25 server: the initialize handshake only (no server/discover)
    async with stdio_server() as (read, write), server.lifespan(server) as state:
        options = server.create_initialization_options()
        await serve_loop(server, read, write, lifespan_state=state, init_options=options)


anyio.run(main)
"""


def config(tmp_path: Path, method: str, code: int) -> Path:
    script = tmp_path / "lacking_server.py"
    script.write_text(SERVER, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[mcp]]\nname = "duck"\ncommand = {sys.executable!r}\n'.replace("'", '"')
        + f'args = ["{script}", "{method}", "{code}"]\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("method", ["resources/list", "resources/templates/list", "prompts/list"])
def test_an_optional_listing_the_server_lacks_is_skipped_and_its_tool_binds(
    tmp_path: Path, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, method, -32601)) as toolset:
            assert toolset.quarantined == ()
            assert toolset.names() == ["duck_query"]
            # the call waits for the re-listing the start-up list_changed asked for
            assert (await toolset["duck_query"].call({})).value == "answered"
            entry = toolset.resources[MCP_SERVERS]["duck"]
            assert (entry["status"], entry["skipped"], entry["list_changed"]) == (
                "ready",
                [method],
                1,
            )
            assert toolset.resources[MCP_LIVE]["duck"].revoked == {}

    with caplog.at_level(logging.DEBUG, logger="toolproof.mcp"):
        asyncio.run(main())
    records = [r for r in caplog.records if r.name == "toolproof.mcp"]
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []
    assert [r.getMessage() for r in records if r.levelno == logging.INFO] == [
        f"MCP server 'duck' does not serve {method} (-32601, method not found); skipped"
    ]


def test_another_error_answer_to_a_listing_refuses_the_server_naming_the_method(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, "resources/templates/list", -32603)) as toolset:
            assert toolset.names() == []
            [refused] = toolset.quarantined
            assert (refused.name, refused.field) == ("duck", "mcp[0]")
            assert refused.rule.startswith(
                "MCP server 'duck': answered resources/templates/list with error -32603: "
                "disk on fire; stderr"
            ), refused.rule

    asyncio.run(main())


def test_a_list_changed_while_starting_prints_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, "none", 0)) as toolset:
            assert toolset.names() == ["duck_query"]

    with caplog.at_level(logging.DEBUG, logger="toolproof.mcp"):
        asyncio.run(main())
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "toolproof.mcp" and r.levelno >= logging.WARNING
    ]
    assert warnings == []
