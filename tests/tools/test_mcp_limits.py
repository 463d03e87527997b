"""toolproof as an MCP client bounds each message a stdio server writes ([[mcp]] max_message_bytes).

The server (written by the test) is a real stdio process speaking raw JSON-RPC; its
tool ``huge`` answers with a 40 MB line, over the 32 MiB default. The line never
reaches the client's memory: the server is stopped, the call fails ``transport``
naming the limit, and a server whose ``tools/list`` is over the limit is quarantined.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from toolproof import load_toolset
from toolproof.errors import ConfigError

SERVER = r"""
import json, sys

HUGE = 40_000_000
at_start = sys.argv[1] == "list"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tool(name, description="x"):
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    reply = {"jsonrpc": "2.0", "id": message["id"]}
    method = message["method"]
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "big", "version": "1"},
        }
    elif method == "tools/list":
        described = "d" * HUGE if at_start else "x"
        reply["result"] = {"tools": [tool("huge", described), tool("medium"), tool("small")]}
    elif method == "tools/call" and message["params"]["name"] == "huge":
        reply["result"] = {"content": [{"type": "text", "text": "y" * HUGE}]}
    elif method == "tools/call" and message["params"]["name"] == "medium":
        reply["result"] = {"content": [{"type": "text", "text": "m" * 5000}]}
    else:
        reply["result"] = {"content": [{"type": "text", "text": "small"}]}
    send(reply)
"""


def config(tmp_path: Path, mode: str, extra: str = "") -> Path:
    script = tmp_path / "big_server.py"
    script.write_text(SERVER, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[mcp]]\nname = "big"\ncommand = {sys.executable!r}\n'.replace("'", '"')
        + f'args = ["{script}", "{mode}"]\n'
        + extra,
        encoding="utf-8",
    )
    return path


LIMIT = (
    "was stopped: it wrote a JSON-RPC message longer than the stdio limit of 33554432 bytes "
    "(32 MiB, [[mcp]] max_message_bytes)"
)


def test_a_result_over_the_limit_stops_the_server_and_fails_naming_the_limit(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, "call")) as toolset:
            assert (await toolset["big_small"].call({})).value == "small"
            failure = (await toolset["big_huge"].call({})).failure
            assert failure is not None
            assert (failure.kind, failure.where) == ("transport", "transport")
            assert failure.message == (
                "MCP server 'big' closed the connection during tools/call: Connection closed; "
                f"the server process {LIMIT}"
            )

    asyncio.run(main())


def test_a_listing_over_the_limit_quarantines_the_server_naming_the_limit(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, "list")) as toolset:
            assert toolset.names() == []
            [refused] = toolset.quarantined
            assert refused.rule == (
                "MCP server 'big': the server closed the connection before answering "
                f"initialize and tools/list (the server process {LIMIT}); stderr was empty"
            )

    asyncio.run(main())


def test_the_limit_is_configurable_per_server(tmp_path: Path) -> None:
    async def main() -> None:
        path = config(tmp_path, "call", "max_message_bytes = 2048\n")
        async with load_toolset(path) as toolset:
            assert (await toolset["big_small"].call({})).value == "small"
            failure = (await toolset["big_medium"].call({})).failure
            assert failure is not None
            assert failure.message.endswith(
                "the server process was stopped: it wrote a JSON-RPC message longer than the "
                "stdio limit of 2048 bytes (2 KiB, [[mcp]] max_message_bytes)"
            )
        async with load_toolset(config(tmp_path, "call")) as toolset:  # 32 MiB by default
            assert (await toolset["big_medium"].call({})).value == "m" * 5000

    asyncio.run(main())


def test_an_absurd_limit_is_refused_at_load(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(config(tmp_path, "call", "max_message_bytes = 10\n")):
            pass

    with pytest.raises(ConfigError) as caught:
        asyncio.run(main())
    assert "mcp[0].max_message_bytes" in str(caught.value)
    assert "10 is not a message limit: bytes, from 1024 (1 KiB) to 1073741824 (1 GiB)" in str(
        caught.value
    )
