"""``toolproof serve`` over stdio: fd 1 carries JSON-RPC only, whatever a tool module writes.

The fixture module (``tests/fixtures/noisy``) prints at import (plain text and a forged
JSON-RPC answer), writes to fd 1 with ``os.write``, and in its tool body prints, writes
to fd 1 and runs a child process that prints. All of it must land on stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "noisy" / "toolproof.toml"
SCRIPT = Path(sys.executable).parent / "toolproof"
NOISE = [
    "noisy: print at import",
    '{"jsonrpc": "2.0", "id": 1, "result": {"forged": true}}',
    "noisy: os.write(1) at import",
    "noisy: print in the body (hi)",
    "noisy: os.write(1) in the body",
    "noisy: a child process",
]


def message(id_: int | None, method: str, params: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        body["id"] = id_
    return json.dumps(body).encode() + b"\n"


def test_stdout_of_a_tool_module_never_reaches_the_json_rpc_stream(tmp_path: Path) -> None:
    requests = b"".join(
        [
            message(
                1,
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            ),
            message(None, "notifications/initialized", {}),
            message(2, "tools/call", {"name": "shout", "arguments": {"text": "hi"}}),
        ]
    )
    stderr = tmp_path / "stderr"
    with (
        stderr.open("wb") as err,
        subprocess.Popen(
            [str(SCRIPT), "serve", "--config", str(CONFIG)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        ) as server,
    ):
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(requests)
        server.stdin.flush()
        lines = [server.stdout.readline(), server.stdout.readline()]
        server.stdin.close()  # closing stdin stops a stdio server cleanly
        rest = server.stdout.read()
        assert server.wait(30) == 0
    answers = [json.loads(line) for line in lines]
    assert rest == b""
    assert [(a["jsonrpc"], a["id"]) for a in answers] == [("2.0", 1), ("2.0", 2)]
    assert answers[0]["result"]["serverInfo"]["name"] == "toolproof"
    assert answers[1]["result"]["content"] == [{"type": "text", "text": "HI"}]
    logged = stderr.read_text(encoding="utf-8").splitlines()
    assert [line for line in logged if line in NOISE] == NOISE


def test_the_sdk_client_sees_no_junk_and_the_noise_goes_to_stderr(tmp_path: Path) -> None:
    problems: list[Exception] = []

    async def on_message(item: Any) -> None:
        if isinstance(item, Exception):
            problems.append(item)

    async def scenario() -> str:
        params = StdioServerParameters(
            command=str(SCRIPT), args=["serve", "--config", str(CONFIG)], env=dict(os.environ)
        )
        with (tmp_path / "stderr").open("w", encoding="utf-8") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=on_message) as session,
            ):
                await session.initialize()
                answer = await session.call_tool("shout", {"text": "hi"})
        text: str = answer.content[0].text  # type: ignore[union-attr]
        return text

    assert asyncio.run(scenario()) == "HI"
    assert problems == []
    logged = (tmp_path / "stderr").read_text(encoding="utf-8").splitlines()
    assert [line for line in logged if line in NOISE] == NOISE
