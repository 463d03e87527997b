"""``toolproof serve`` as a real subprocess: the SDK client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from typing import Any

from mcp import Client, StdioServerParameters
from serve_helpers import SERVE_CONFIG, TOOLPROOF, free_port, spawn


def stdio_params(*extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=TOOLPROOF[0], args=[*TOOLPROOF[1:], "serve", "--config", str(SERVE_CONFIG), *extra]
    )


async def _exercise(client: Client) -> dict[str, Any]:
    names = [tool.name for tool in (await client.list_tools()).tools]
    added = await client.call_tool("add", {"a": 1, "b": 2})
    bad = await client.call_tool("add", {"b": 2})
    return {
        "names": names,
        "added": (added.is_error, added.structured_content),
        "bad": (bad.is_error, bad.content[0].text),
    }


EXPECTED = {
    "names": ["add", "echo", "explode", "segment", "segments", "whoami"],
    "added": (False, {"result": 3}),
    "bad": (
        True,
        "invalid_arguments: invalid arguments for tool 'add': \"a\" is a required property",
    ),
}


def test_stdio_lists_and_calls_with_the_legacy_handshake() -> None:
    async def scenario() -> dict[str, Any]:
        async with Client(stdio_params(), mode="legacy") as client:
            return await _exercise(client)

    assert asyncio.run(scenario()) == EXPECTED


def test_stdio_lists_and_calls_with_protocol_discovery() -> None:
    async def scenario() -> dict[str, Any]:
        async with Client(stdio_params()) as client:
            return await _exercise(client)

    assert asyncio.run(scenario()) == EXPECTED


def test_streamable_http_lists_and_calls() -> None:
    port = free_port()
    with spawn(["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"], port):

        async def scenario() -> dict[str, Any]:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await _exercise(client)

        assert asyncio.run(scenario()) == EXPECTED


def test_streamable_http_stops_cleanly_on_sigterm() -> None:
    port = free_port()
    with spawn(["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"], port) as p:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0


def test_stdio_stops_on_sigterm_with_stdin_still_open() -> None:
    process = subprocess.Popen(
        [*TOOLPROOF, "serve", "--config", str(SERVE_CONFIG)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        ready = process.stderr.readline()  # printed once the Toolset is loaded
        assert ready == b"toolproof: serving 6 tools over MCP stdio\n"
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_bad_http_address_is_refused_with_exit_code_1() -> None:
    done = subprocess.run(
        [*TOOLPROOF, "serve", "--config", str(SERVE_CONFIG), "--http", "localhost"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "--http 'localhost': expected HOST:PORT with a port in 1-65535" in done.stderr
