"""MCP CLIENT spans against a real third-party server (issue 20 point 2).

``@modelcontextprotocol/server-everything`` (npm, ``.ci/services``) over stdio and over
streamable HTTP; spans land in the SDK's real ``InMemorySpanExporter``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_support import everything_bin, mcp1_venv
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from toolproof import load_toolset

pytestmark = pytest.mark.service


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_call_to_an_imported_stdio_server_is_a_client_span(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    config = f'[[mcp]]\nname = "ev"\ncommand = "{everything_bin()}"\nargs = ["stdio"]\n'

    async def main() -> list[Any]:
        async with load_toolset(write(tmp_path, config)) as toolset:
            first = await toolset["ev_echo"].call({"message": "one"})
            second = await toolset["ev_get-sum"].call({"a": 1, "b": 2})
            return [first.value, second.value]

    assert asyncio.run(main()) == ["Echo: one", "The sum of 1 and 2 is 3."]
    [outer] = named(exporter, "execute_tool ev_echo")
    [echo] = named(exporter, "tools/call echo")
    [total] = named(exporter, "tools/call get-sum")
    assert (echo.kind, echo.parent and echo.parent.span_id) == (SpanKind.CLIENT, span_id(outer))
    attributes = dict(echo.attributes or {})
    version = attributes.pop("mcp.protocol.version")
    assert isinstance(version, str) and len(version) == len("2025-06-18")
    echo_id = attributes.pop("jsonrpc.request.id")
    assert attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "network.transport": "pipe",
    }
    assert total.attributes is not None
    # the ids are the JSON-RPC ids written on the wire: increasing, one per request
    assert int(str(total.attributes["jsonrpc.request.id"])) > int(str(echo_id)) > 0
    assert echo.status.status_code.name == "UNSET"


def test_a_server_on_the_mcp_1x_sdk_takes_the_injected_traceparent(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """``params._meta`` with ``traceparent`` is an open map for a 1.x server too."""
    server = mcp1_venv() / "bin" / "mcp-server-time"
    config = f'[[mcp]]\nname = "time"\ncommand = "{server}"\nargs = ["--local-timezone", "UTC"]\n'

    async def main() -> bool:
        async with load_toolset(write(tmp_path, config)) as toolset:
            return (await toolset["time_get_current_time"].call({"timezone": "UTC"})).ok

    assert asyncio.run(main()) is True
    [span] = named(exporter, "tools/call get_current_time")
    assert span.attributes is not None
    assert (span.kind, span.status.status_code.name) == (SpanKind.CLIENT, "UNSET")
    assert span.attributes["network.transport"] == "pipe"
    assert str(span.attributes["jsonrpc.request.id"]).isdigit()


def test_a_call_over_streamable_http_names_the_session_and_the_server(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        [str(everything_bin()), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "streamable-HTTP server did not listen"
                time.sleep(0.05)
        config = f'[[mcp]]\nname = "web"\nurl = "http://127.0.0.1:{port}/mcp"\n'

        async def main() -> Any:
            async with load_toolset(write(tmp_path, config)) as toolset:
                return (await toolset["web_echo"].call({"message": "over http"})).value

        assert asyncio.run(main()) == "Echo: over http"
    finally:
        server.terminate()
        server.wait(timeout=10)
    [echo] = named(exporter, "tools/call echo")
    assert echo.attributes is not None
    session = echo.attributes["mcp.session.id"]
    assert isinstance(session, str) and len(session) >= 16
    assert {key: echo.attributes[key] for key in ("network.transport", "server.address")} == {
        "network.transport": "tcp",
        "server.address": "127.0.0.1",
    }
    assert echo.attributes["server.port"] == port
