"""MCP spans (issue 20 point 2 and 5): ``serve``'s SERVER spans, the client's CLIENT spans,
and the W3C ``traceparent`` in ``params._meta`` both ways.

Spans land in the SDK's real ``InMemorySpanExporter``; the subprocess test starts a real
``toolproof serve`` over stdio, imported as an ``[[mcp]]`` server, whose spans reach a real
OTLP/HTTP receiver on 127.0.0.1 (built on ``opentelemetry-proto``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from serve_helpers import free_port, spawn

from toolproof import Tool, Toolset, load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.identity import digest_json

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CALLER_SPAN = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE_ID:032x}-{CALLER_SPAN:016x}-01"


def spans(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    found = {span.name: span for span in exporter.get_finished_spans()}
    assert len(found) == len(exporter.get_finished_spans()), "span names repeat"
    return found


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent(span: ReadableSpan) -> tuple[int, int] | None:
    return (span.parent.trace_id, span.parent.span_id) if span.parent is not None else None


def meta(**keys: str) -> Any:
    """A request ``_meta`` (the SDK types it as an open TypedDict)."""
    return dict(keys)


def toolset() -> Toolset:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    made = Toolset()
    made.add(Tool.from_function(add))
    return made.seal()


def test_serve_continues_the_trace_named_in_meta(exporter: InMemorySpanExporter) -> None:
    async def main() -> Any:
        async with Client(build_server(toolset())) as client:
            return await client.call_tool(
                "add", {"a": 2, "b": 3}, meta=meta(traceparent=TRACEPARENT, tracestate="k=v")
            )

    result = asyncio.run(main())
    assert result.structured_content == {"result": 5}
    found = spans(exporter)
    server = found["tools/call add"]
    assert server.kind == SpanKind.SERVER
    assert parent(server) == (TRACE_ID, CALLER_SPAN)
    assert server.context is not None and server.context.trace_state.get("k") == "v"
    attributes = dict(server.attributes or {})
    assert attributes.pop("jsonrpc.request.id").isdigit()  # type: ignore[union-attr]
    assert attributes.pop("mcp.protocol.version")
    assert attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "network.transport": "pipe",
    }
    tool = found["execute_tool add"]
    assert parent(tool) == ids(server)
    assert tool.attributes is not None
    assert tool.attributes["toolproof.result_digest"] == digest_json(5)
    # the other requests (the handshake, tools/list) carry no traceparent: traces of their own
    others = [span for name, span in found.items() if name not in {"tools/call add", tool.name}]
    assert {span.name for span in others} >= {"tools/list"}
    assert {(span.kind, span.parent) for span in others} == {(SpanKind.SERVER, None)}


def test_serve_records_a_json_rpc_error_and_a_tool_error(exporter: InMemorySpanExporter) -> None:
    async def explode() -> int:
        """Always fail."""
        raise RuntimeError("boom")

    made = Toolset()
    made.add(Tool.from_function(explode))
    made.seal()

    async def main() -> Any:
        async with Client(build_server(made)) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("nope", {})
            return caught.value.error.code, await client.call_tool("explode", {})

    code, answered = asyncio.run(main())
    assert code == -32602 and answered.is_error is True
    found = spans(exporter)
    unknown = found["tools/call nope"]
    assert unknown.attributes is not None
    assert (unknown.attributes["error.type"], unknown.attributes["rpc.response.status_code"]) == (
        "-32602",
        "-32602",
    )
    assert unknown.status.status_code.name == "ERROR"
    assert unknown.status.description == "-32602"  # content capture off: the code, no text
    failed = found["tools/call explode"]
    assert failed.attributes is not None and failed.attributes["error.type"] == "tool_error"
    assert found["execute_tool explode"].attributes["error.type"] == "tool_error"  # type: ignore[index]


def test_serve_without_toolproof_telemetry_emits_no_toolproof_span() -> None:
    made = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(made))

    async def main() -> None:
        async with Client(build_server(toolset())) as client:
            await client.call_tool("add", {"a": 1, "b": 1}, meta=meta(traceparent=TRACEPARENT))

    asyncio.run(main())
    assert made.get_finished_spans() == ()


class _Receiver(BaseHTTPRequestHandler):
    requests: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).requests.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


SERVED_TOOLS = '''
import toolproof


@toolproof.tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


def test_client_span_injects_traceparent_and_a_real_serve_continues_it(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """A toolset imports a real ``toolproof serve`` (stdio subprocess, [telemetry] on,
    OTLP to a receiver here): one trace runs from the caller's tool span through the MCP
    CLIENT span to the server's SERVER span and its tool span."""
    _Receiver.requests.clear()
    receiver = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{receiver.server_port}/v1/traces"
    served = tmp_path / "served"
    served.mkdir()
    (served / "served_tools.py").write_text(SERVED_TOOLS, encoding="utf-8")
    (served / "toolproof.toml").write_text(
        '[[python]]\nmodule = "served_tools"\n\n[telemetry]\nenabled = true\n', encoding="utf-8"
    )
    command = json.dumps(sys.executable)
    args = json.dumps(
        [
            "-c",
            "from toolproof.adapters.cli import main; main()",
            "serve",
            "--config",
            str(served / "toolproof.toml"),
        ]
    )
    (tmp_path / "toolproof.toml").write_text(
        f'[[mcp]]\nname = "remote"\ncommand = {command}\nargs = {args}\n'
        f'env = {{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "{endpoint}" }}\n',
        encoding="utf-8",
    )

    async def main() -> Any:
        async with load_toolset(tmp_path / "toolproof.toml") as loaded:
            return await loaded["remote_add"].call({"a": 20, "b": 22})

    try:
        result = asyncio.run(main())  # closing the toolset ends serve, which flushes
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert result.value == {"result": 42}
    found = spans(exporter)
    outer = found["execute_tool remote_add"]
    client = found["tools/call add"]
    assert client.kind == SpanKind.CLIENT
    assert parent(client) == ids(outer)
    attributes = dict(client.attributes or {})
    request_id = attributes.pop("jsonrpc.request.id")
    assert attributes.pop("mcp.protocol.version")
    assert attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "network.transport": "pipe",
    }
    remote = {
        span.name: span
        for request in _Receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    server = remote["tools/call add"]
    trace_id, client_span = ids(client)
    assert server.trace_id == trace_id.to_bytes(16, "big")
    assert server.parent_span_id == client_span.to_bytes(8, "big")
    assert server.kind == server.SPAN_KIND_SERVER
    server_attributes = {item.key: item.value.string_value for item in server.attributes}
    assert server_attributes["jsonrpc.request.id"] == request_id
    assert server_attributes["mcp.protocol.version"] == client.attributes["mcp.protocol.version"]  # type: ignore[index]
    tool = remote["execute_tool add"]
    assert (tool.trace_id, tool.parent_span_id) == (server.trace_id, server.span_id)


def test_over_streamable_http_both_sides_name_the_same_session(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """A real ``toolproof serve --http`` ([telemetry] on, OTLP to a receiver here) and a
    toolset importing it by URL: client and server spans carry one ``mcp.session.id``."""
    _Receiver.requests.clear()
    receiver = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{receiver.server_port}/v1/traces"
    served = tmp_path / "served"
    served.mkdir()
    (served / "served_tools.py").write_text(SERVED_TOOLS, encoding="utf-8")
    (served / "toolproof.toml").write_text(
        '[[python]]\nmodule = "served_tools"\n\n[telemetry]\nenabled = true\n', encoding="utf-8"
    )
    port = free_port()
    (tmp_path / "toolproof.toml").write_text(
        # 2025-11-25: a session (2026-07-28 is stateless: no Mcp-Session-Id to name)
        f'[[mcp]]\nname = "web"\nurl = "http://127.0.0.1:{port}/mcp"\nprotocol = "2025-11-25"\n',
        encoding="utf-8",
    )

    async def main() -> Any:
        async with load_toolset(tmp_path / "toolproof.toml") as loaded:
            return (await loaded["web_add"].call({"a": 1, "b": 2})).value

    args = ["serve", "--config", str(served / "toolproof.toml"), "--http", f"127.0.0.1:{port}"]
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint}
    try:
        with spawn(args, port, env=env):
            assert asyncio.run(main()) == {"result": 3}
        # leaving spawn SIGTERMs serve, which flushes its spans before it exits
    finally:
        receiver.shutdown()
        receiver.server_close()
    client = spans(exporter)["tools/call add"]
    assert client.attributes is not None
    session = client.attributes["mcp.session.id"]
    assert isinstance(session, str) and session
    assert (client.attributes["network.transport"], client.attributes["server.port"]) == (
        "tcp",
        port,
    )
    [server] = [
        span
        for request in _Receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == "tools/call add"
    ]
    attributes = {item.key: item.value for item in server.attributes}
    assert attributes["mcp.session.id"].string_value == session
    assert attributes["network.transport"].string_value == "tcp"
    assert attributes["client.address"].string_value == "127.0.0.1"
    assert server.parent_span_id == ids(client)[1].to_bytes(8, "big")
