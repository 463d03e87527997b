"""``toolproof serve`` as a real subprocess: the SDK client over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serve_helpers import SERVE_CONFIG, SERVE_TOOLS, TOOLPROOF, free_port, spawn

from toolproof.adapters.cli.serve import parse_address
from toolproof.errors import InputError


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
    "names": SERVE_TOOLS,
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
        assert ready == b"toolproof: serving 12 tools over MCP stdio\n"
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


async def _variants(client: Client) -> dict[str, Any]:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    retry = await client.call_tool("add_retry", {"a": 1, "b": 2})
    renamed = await client.call_tool("add_args", {"x": 5})
    hidden = await client.call_tool("add_args", {"x": 5, "b": 1})
    projected = await client.call_tool("segment_project", {"x": 7})
    here = await client.call_tool("whoami", {})
    worker = await client.call_tool("whoami_process", {})
    return {
        "schemas": (
            tools["add_retry"].input_schema == tools["add"].input_schema,
            tools["add_args"].input_schema["properties"],
            tools["add_args"].input_schema["required"],
            tools["segment_project"].output_schema,
            tools["add_retry"].output_schema == tools["add"].output_schema,
        ),
        "retry": retry.structured_content,
        "renamed": renamed.structured_content,
        "hidden": (hidden.is_error, hidden.content[0].text),
        "projected": (projected.structured_content, projected.content[0].text),
        "pids": (here.structured_content["result"], worker.structured_content["result"]),
    }


def _check_variants(seen: dict[str, Any], server_pid: int) -> None:
    assert seen["schemas"] == (
        True,
        {"x": {"type": "integer", "description": "the first addend."}},
        ["x"],
        {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
        True,
    )
    assert seen["retry"] == {"result": 3}
    assert seen["renamed"] == {"result": 15}
    assert seen["hidden"][0] is True
    assert seen["hidden"][1].startswith("invalid_arguments: invalid arguments for tool 'add_args'")
    assert seen["projected"] == ({"result": 7}, "7")
    here, worker = seen["pids"]
    assert here == server_pid
    assert worker != server_pid


def test_variants_over_stdio_base_wrapper_transformers_and_a_process_backend() -> None:
    async def scenario() -> dict[str, Any]:
        async with Client(stdio_params()) as client:
            return await _variants(client)

    seen = asyncio.run(scenario())
    _check_variants(seen, seen["pids"][0])
    assert seen["pids"][0] != os.getpid()


def test_variants_over_streamable_http_with_a_process_backend() -> None:
    port = free_port()
    args = ["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"]
    with spawn(args, port) as process:

        async def scenario() -> dict[str, Any]:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await _variants(client)

        seen = asyncio.run(scenario())
        worker_pid = seen["pids"][1]
        assert Path(f"/proc/{worker_pid}").exists()  # a live worker process of the pool
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text(
            encoding="utf-8"
        )
        assert str(worker_pid) in children.split()
    _check_variants(seen, process.pid)
    assert not Path(f"/proc/{worker_pid}").exists()  # the pool is shut down with the server


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("[::1]:8765", ("::1", 8765)),
        ("localhost:1", ("localhost", 1)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
    ],
)
def test_http_addresses_parse(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["localhost", ":8000", "h:0", "h:65536", "h:80a", "[]:80", ""])
def test_bad_http_addresses_are_refused_naming_the_rule(text: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_address(text)
    assert caught.value.message == (
        f"--http {text!r}: expected HOST:PORT with a port in 1-65535 "
        "(e.g. 127.0.0.1:8000 or [::1]:8000)"
    )


MCP_TOKEN = "mcp-token-0123456789abcdef"


def test_streamable_http_with_a_token_refuses_requests_without_it(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(MCP_TOKEN + "\n", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    args = ["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"]
    with spawn([*args, "--token-file", str(token_file)], port):
        bare = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"})

        async def scenario() -> Any:
            headers = {"Authorization": f"Bearer {MCP_TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return await client.call_tool("add", {"a": 1, "b": 2})

        answer = asyncio.run(scenario())
    assert (bare.status_code, bare.headers["www-authenticate"]) == (401, "Bearer")
    assert bare.json() == {
        "status": 401,
        "error": "unauthorized",
        "message": "missing bearer token (Authorization: Bearer ...)",
        "fields": {},
    }
    assert (wrong.status_code, wrong.json()["message"]) == (401, "wrong bearer token")
    assert answer.structured_content == {"result": 3}


def test_http_off_loopback_without_a_token_is_refused() -> None:
    env = {key: value for key, value in os.environ.items() if key != "TOOLPROOF_MCP_TOKEN"}
    done = subprocess.run(
        [*TOOLPROOF, "serve", "--config", str(SERVE_CONFIG), "--http", f"0.0.0.0:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 1
    assert (
        "serving MCP over HTTP on '0.0.0.0' (not loopback) needs a bearer token: pass "
        "--token-file FILE, --clients FILE or set TOOLPROOF_MCP_TOKEN"
    ) in done.stderr
