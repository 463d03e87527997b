"""MCP import against the fixture server: naming, schemas, result mapping, faults."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mcp_support import FIXTURE, alive, descendants, fixture_entry, servers

from toolproof import load_toolset
from toolproof.contract.tools import ToolAnnotations
from toolproof.redaction import redacted
from toolproof.sources.mcp.common import CONNECTION_CLOSED, McpCallError, McpServer
from toolproof.sources.mcp.connection import McpConnection
from toolproof.tools.resources import MCP_LIVE, MCP_SERVERS
from toolproof.tools.toolset import Toolset

FIXTURE_TOOLS = [
    "fixture_badstructured",
    "fixture_die",
    "fixture_echo",
    "fixture_empty",
    "fixture_fail",
    "fixture_multi",
    "fixture_mutate",
    "fixture_pid",
    "fixture_sleep",
    "fixture_structured",
]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def server_pid(toolset: Toolset, name: str = "fixture_pid") -> int:
    return int((await toolset[name].call({})).unwrap())  # type: ignore[arg-type]


def test_fixture_tools_bind_with_prefix_schemas_annotations_and_source(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture"))) as toolset:
            assert toolset.names() == FIXTURE_TOOLS
            [bad] = toolset.quarantined
            assert (bad.name, bad.field, bad.owner) == ("fixture_bad name!", "name", "mcp:fixture")
            echo = toolset["fixture_echo"]
            assert echo.spec.input_schema["properties"]["a"] == {
                "type": ["integer", "null"],
                "default": 5,
            }
            assert echo.spec.annotations == ToolAnnotations(
                title="Echo", readOnlyHint=True, openWorldHint=False
            )
            assert echo.spec.description == "fixture tool echo"
            assert echo.spec.version == "1.2.3"
            assert echo.descriptor().source == "mcp:fixture"
            assert toolset.owner("fixture_echo") == "mcp:fixture"
            assert toolset["fixture_structured"].spec.output_schema == {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            }
            entry = toolset.resources[MCP_SERVERS]["fixture"]
            assert entry["status"] == "ready"
            assert entry["server_info"] == {"name": "fixture", "version": "1.2.3"}
            assert entry["protocol_version"] == "2025-03-26"
            assert entry["list_changed"] == 0

    asyncio.run(main())


def test_empty_prefix_keeps_the_server_names(tmp_path: Path) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", prefix=""))
        async with load_toolset(path) as toolset:
            assert toolset.names() == [name.removeprefix("fixture_") for name in FIXTURE_TOOLS]

    asyncio.run(main())


def test_explicit_prefix_replaces_the_server_name(tmp_path: Path) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", prefix="fx"))
        async with load_toolset(path) as toolset:
            assert "fx_echo" in toolset
            assert "fixture_echo" not in toolset

    asyncio.run(main())


def test_the_server_receives_exactly_the_callers_arguments(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture"))) as toolset:
            echo = toolset["fixture_echo"]
            sent = await echo.call({"a": None, "odd key": "x"})
            assert sent.value == '{"a": null, "odd key": "x"}'
            assert (await echo.call({})).value == "{}"
            refused = await echo.call({"a": "5"})
            assert refused.failure is not None
            assert refused.failure.kind == "invalid_arguments"

    asyncio.run(main())


def test_results_map_to_structured_text_or_content_blocks(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture"))) as toolset:
            assert (await toolset["fixture_structured"].call({})).value == {"n": 42}
            assert (await toolset["fixture_multi"].call({})).value == {
                "toolproof/content": [
                    {"type": "text", "text": "one"},
                    {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                ]
            }
            assert (await toolset["fixture_empty"].call({})).value == {"toolproof/content": []}
            failed = (await toolset["fixture_fail"].call({})).failure
            assert failed is not None
            assert (failed.kind, failed.where, failed.retryable) == ("tool_error", "body", False)
            assert failed.message == (
                "MCP tool 'fail' on server 'fixture' reported an error: boom: bad thing\n"
                "second line"
            )
            assert failed.detail["content"] == [
                {"type": "text", "text": "boom: bad thing"},
                {"type": "text", "text": "second line"},
            ]
            bad = (await toolset["fixture_badstructured"].call({})).failure
            assert bad is not None
            assert (bad.kind, bad.where) == ("invalid_result", "output")
            # checked by the Tool within its bounds, not by the SDK's unbounded in-loop check
            assert bad.message == (
                "tool 'fixture_badstructured' returned a value that breaks its output schema: "
                '/n: "x" is not of type "integer"'
            )

    asyncio.run(main())


def test_junk_on_stdout_before_json_rpc_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", "--junk"))
        async with load_toolset(path) as toolset:
            assert toolset.names() == FIXTURE_TOOLS
            assert (await toolset["fixture_echo"].call({"b": "ok"})).value == '{"b": "ok"}'

    with caplog.at_level(logging.CRITICAL):
        asyncio.run(main())


def test_paginated_listing_is_followed_to_the_end(tmp_path: Path) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", "--page-size", "3"))
        async with load_toolset(path) as toolset:
            assert toolset.names() == FIXTURE_TOOLS

    asyncio.run(main())


def test_servers_that_fail_to_start_are_quarantined_and_the_others_bind(tmp_path: Path) -> None:
    config = (
        fixture_entry("fixture")
        + fixture_entry("exits", "--exit-at-start")
        + '[[mcp]]\nname = "missing"\ncommand = "no-such-mcp-server-xyz"\n'
        + fixture_entry("silent", "--silent", startup_timeout=0.5)
    )

    async def main() -> None:
        before = descendants()
        started = time.monotonic()
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert time.monotonic() - started < 10
            assert toolset.names() == FIXTURE_TOOLS
            [running] = servers(descendants() - before)  # the failed servers are gone already
            assert running == await server_pid(toolset)
            by_name = {item.name: item for item in toolset.quarantined}
            exits, missing, silent = by_name["exits"], by_name["missing"], by_name["silent"]
            assert (exits.field, exits.owner) == ("mcp[1]", "mcp:exits")
            assert re.fullmatch(
                r"MCP server 'exits': the server closed the connection before answering "
                r"initialize and tools/list \(the server process exited with status 3\); "
                r"stderr tail: fixture: started pid \d+\n"
                r"fixture: refusing to start \(exit 3\)",
                exits.rule,
            ), exits.rule
            assert missing.field == "mcp[2]"
            assert missing.rule == (
                "MCP server 'missing': cannot launch 'no-such-mcp-server-xyz': "
                "No such file or directory; stderr was empty"
            )
            assert silent.field == "mcp[3]"
            assert re.fullmatch(
                r"MCP server 'silent': did not answer initialize and tools/list within 0.5 s "
                r"\(startup_timeout\); stderr tail: fixture: started pid \d+",
                silent.rule,
            ), silent.rule
            statuses = {name: e["status"] for name, e in toolset.resources[MCP_SERVERS].items()}
            assert statuses == {
                "fixture": "ready",
                "exits": "failed",
                "missing": "failed",
                "silent": "failed",
            }

    asyncio.run(main())


def test_a_server_dying_mid_call_gives_a_transport_failure(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture"))) as toolset:
            failure = (await toolset["fixture_die"].call({})).failure
            assert failure is not None
            assert (failure.kind, failure.where) == ("transport", "transport")
            assert (
                failure.message == "MCP server 'fixture' closed the connection during tools/call: "
                "Connection closed; "
                "the server process exited with status 7"
            )
            assert "fixture: dying mid-call" in str(failure.detail["stderr"])
            again = (await toolset["fixture_echo"].call({})).failure
            assert again is not None
            assert again.kind == "transport"

    asyncio.run(main())


def test_killing_the_server_mid_call_fails_within_the_call_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", call_timeout=10))
        async with load_toolset(path) as toolset:
            pid = await server_pid(toolset)
            call = asyncio.create_task(toolset["fixture_sleep"].call({"seconds": 60}))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            result = await call
            assert time.monotonic() - started < 10
            assert result.failure is not None
            assert (result.failure.kind, result.failure.where) == ("transport", "transport")

    asyncio.run(main())


def test_a_call_without_answer_times_out(tmp_path: Path) -> None:
    async def main() -> None:
        path = write(tmp_path, fixture_entry("fixture", call_timeout=0.5))
        async with load_toolset(path) as toolset:
            started = time.monotonic()
            failure = (await toolset["fixture_sleep"].call({"seconds": 10})).failure
            # one-sided and generous: the 0.5 s call timeout, not the 10 s body
            assert time.monotonic() - started < 5
            assert failure is not None
            assert (failure.kind, failure.where, failure.retryable) == (
                "timeout",
                "transport",
                True,
            )
            assert failure.message == "MCP server 'fixture' did not answer tools/call within 0.5 s"

    asyncio.run(main())


def test_no_server_process_outlives_the_toolset(tmp_path: Path) -> None:
    config = fixture_entry("one") + fixture_entry("two") + fixture_entry("three", "--junk")

    async def main() -> None:
        before = descendants()
        toolset = await load_toolset(write(tmp_path, config))
        pids = {await server_pid(toolset, f"{name}_pid") for name in ("one", "two", "three")}
        spawned = descendants() - before
        assert pids <= spawned
        await toolset.aclose()
        assert alive(spawned) == set()

    asyncio.run(main())


def test_list_changed_quarantines_changed_and_vanished_tools_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    path = write(tmp_path, fixture_entry("fixture", "--state", str(state)))

    async def main() -> dict[str, Any]:
        async with load_toolset(path) as toolset:
            assert (await toolset["fixture_mutate"].call({})).value == "mutated"
            for _ in range(100):
                if toolset.resources[MCP_SERVERS]["fixture"]["list_changed"]:
                    break
                await asyncio.sleep(0.02)
            assert toolset.resources[MCP_SERVERS]["fixture"]["list_changed"] == 1
            assert toolset.names() == FIXTURE_TOOLS  # the sealed inventory does not move
            changed = (await toolset["fixture_echo"].call({"a": 1})).failure
            assert changed is not None and changed.kind == "unavailable"
            assert changed.message == (
                "tool 'fixture_echo' is quarantined: MCP server 'fixture' changed it after it "
                "was bound (notifications/tools/list_changed): /inputSchema/properties/a: "
                '{"default":5,"type":["integer","null"]} -> (absent); /inputSchema/properties/b: '
                '{"type":"string"} -> (absent); /inputSchema/properties/c: (absent) -> '
                '{"type":"string"}; /inputSchema/properties/odd key: {"type":"string"} -> '
                "(absent); reload the tools and review the change (toolproof lock --check, "
                "then --update)"
            )
            gone = (await toolset["fixture_sleep"].call({"seconds": 0})).failure
            assert gone is not None
            assert "the server no longer lists it" in gone.message
            guard = toolset.resources[MCP_LIVE]["fixture"]
            assert set(FIXTURE_TOOLS) <= set(guard.revoked)  # echo changed, the rest vanished
        async with load_toolset(path) as reloaded:
            return {
                "names": reloaded.names(),
                "echo": reloaded["fixture_echo"].spec.input_schema,
            }

    with caplog.at_level(logging.WARNING, logger="toolproof.mcp"):
        after = asyncio.run(main())
    assert after == {
        "names": ["fixture_added", "fixture_echo"],
        "echo": {"type": "object", "properties": {"c": {"type": "string"}}},
    }
    messages = [r.getMessage() for r in caplog.records if r.name == "toolproof.mcp"]
    assert messages[0] == (
        "MCP server 'fixture' sent notifications/tools/list_changed; re-listing its tools: a "
        "bound tool that changed is quarantined, new tools bind at the next load"
    )
    assert messages[1].startswith(
        "MCP server 'fixture' changed its tools (notifications/tools/list_changed): "
        "quarantined fixture_"
    )


def test_a_json_rpc_error_answer_is_a_tool_error(tmp_path: Path) -> None:
    async def main() -> None:
        server = McpServer(name="fixture", command=sys.executable, args=(str(FIXTURE),))
        connection = McpConnection(server, lambda: None)
        await connection.start()
        try:
            with pytest.raises(McpCallError) as caught:
                await connection.call_tool("nope", {})
            assert (caught.value.kind, caught.value.code) == ("protocol", -32602)
            assert (
                str(caught.value)
                == "MCP server 'fixture' answered tools/call with error -32602: Unknown tool: nope"
            )
        finally:
            await connection.aclose()

    asyncio.run(main())


def test_an_unreachable_streamable_http_server_is_quarantined(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    url = f"http://ada:PW-SECRET@127.0.0.1:{port}/mcp?token=TK-SECRET"
    shown = f"http://127.0.0.1:{port}/mcp?token={redacted('TK-SECRET')}"  # issue 30 item 2
    config = f'[[mcp]]\nname = "web"\nurl = "{url}"\nstartup_timeout = 5\n' + fixture_entry(
        "fixture"
    )

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.names() == FIXTURE_TOOLS
            [web] = [item for item in toolset.quarantined if item.name == "web"]
            assert (web.field, web.owner) == ("mcp[0]", "mcp:web")
            assert web.rule == (
                f"MCP server 'web': cannot connect to {shown}: ConnectError: "
                "All connection attempts failed"
            )
            servers = toolset.resources.get(MCP_SERVERS) or {}
            assert servers["web"]["transport"] == {"url": shown}

    asyncio.run(main())


def test_a_cancelled_load_leaves_no_server_behind(tmp_path: Path) -> None:
    config = fixture_entry("fixture") + fixture_entry("silent", "--silent", startup_timeout=30)

    async def cancelled() -> set[int]:
        before = descendants()
        task = asyncio.ensure_future(load_toolset(write(tmp_path, config)))
        while len(servers(descendants() - before)) < 2:
            await asyncio.sleep(0.02)
        spawned = descendants() - before
        task.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 5
        return spawned

    spawned = asyncio.run(cancelled())
    assert spawned
    assert alive(spawned) == set()


class _RecordingMcpHandler(http.server.BaseHTTPRequestHandler):
    """A minimal streamable-HTTP MCP endpoint answering JSON; records request headers."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.seen.append(dict(self.headers))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in body:
            self.send_response(202)
            self.end_headers()
            return
        results: dict[str, Any] = {
            "initialize": {
                "protocolVersion": "2025-03-26",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "recording", "version": "9"},
            },
            "tools/list": {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]},
            "tools/call": {"content": [{"type": "text", "text": "hello back"}]},
        }
        # a method it lacks (server/discover) gets -32601, as a server's must
        if body["method"] in results:
            answer = {"result": results[body["method"]]}
        else:
            answer = {"error": {"code": -32601, "message": "Method not found"}}
        payload = json.dumps({"jsonrpc": "2.0", "id": body["id"], **answer})
        data = payload.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(405)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_streamable_http_sends_the_configured_headers(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingMcpHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    config = f'[[mcp]]\nname = "rec"\nurl = "{url}"\nheaders = {{X-Token = "secret-1"}}\n'

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.names() == ["rec_hello"]
            assert (await toolset["rec_hello"].call({})).value == "hello back"

    try:
        asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    posts = _RecordingMcpHandler.seen
    assert len(posts) >= 3
    assert {headers.get("X-Token") for headers in posts} == {"secret-1"}


def test_a_name_taken_by_another_server_is_quarantined(tmp_path: Path) -> None:
    config = fixture_entry("a", prefix="") + fixture_entry("b", prefix="")

    async def main() -> None:
        async with load_toolset(write(tmp_path, config)) as toolset:
            assert toolset.names() == [name.removeprefix("fixture_") for name in FIXTURE_TOOLS]
            assert all(toolset.owner(name) == "mcp:a" for name in toolset.names())
            taken = [item for item in toolset.quarantined if item.owner == "mcp:b"]
            assert len(taken) == len(FIXTURE_TOOLS) + 1  # and 'bad name!' once more
            echo = next(item for item in taken if item.name == "echo")
            assert (echo.field, echo.rule) == (
                "name",
                "is already taken: defined by mcp:a and again by mcp:b "
                "(rule: tool names are unique in a Toolset)",
            )

    asyncio.run(main())


def test_parallel_calls_share_one_session(tmp_path: Path) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture"))) as toolset:
            echo = toolset["fixture_echo"]
            results = await asyncio.gather(*(echo.call({"a": n}) for n in range(20)))
            assert [result.value for result in results] == [f'{{"a": {n}}}' for n in range(20)]

    asyncio.run(main())


def test_a_server_dying_mid_request_is_a_transport_error_as_for_a_call(tmp_path: Path) -> None:
    """resources/read, prompts/get and the rest map the SDK's errors as tools/call does."""

    async def main() -> None:
        config = write(tmp_path, fixture_entry("fixture", "--die-on-read"))
        async with load_toolset(config) as toolset:
            entry = toolset.catalog.resource_for("fixture://die")
            assert entry is not None
            with pytest.raises(McpCallError) as caught:
                await entry.answer("fixture://die")
            assert (caught.value.kind, caught.value.code) == ("transport", CONNECTION_CLOSED)
            assert str(caught.value) == (
                "MCP server 'fixture' closed the connection during resources/read: "
                "Connection closed; the server process exited with status 7"
            )

    asyncio.run(main())
