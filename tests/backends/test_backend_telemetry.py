"""Backend spans (issue 20 points 2 and 5): the caller's submit span and the worker's span
continuing its trace, through real ``process`` workers and a real ``toolproof worker``.

The caller's spans land in the SDK's ``InMemorySpanExporter``; the workers apply the
file's ``[telemetry]`` and export OTLP/HTTP to a receiver on 127.0.0.1 (built on
``opentelemetry-proto``), the endpoint named by ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from backend_support import REDIS_URL, copy_fixture, require_redis, run
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from toolproof import Tool, Toolset
from toolproof.backends.protocol import (
    ProtocolError,
    decode_request,
    descriptor_digest,
    encode_request,
    serve_request,
)
from toolproof.config import load_toolset

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


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


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real OTLP/HTTP receiver; its endpoint is in the environment the workers inherit."""
    _Receiver.requests.clear()
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
    yield endpoint
    server.shutdown()
    server.server_close()


def received(name: str, timeout: float = 20.0) -> ProtoSpan:
    """The one span ``name`` the receiver got (waiting for a worker's flush)."""
    deadline = time.monotonic() + timeout
    while True:
        found: list[ProtoSpan] = [
            span
            for request in list(_Receiver.requests)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
            if span.name == name
        ]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(found) == 1, f"{name!r}: {len(found)} spans received"
    return found[0]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [span for span in exporter.get_finished_spans() if span.name == name]
    return span


def wire_ids(span: ReadableSpan) -> tuple[bytes, bytes]:
    assert span.context is not None
    return span.context.trace_id.to_bytes(16, "big"), span.context.span_id.to_bytes(8, "big")


def attributes_of(span: ProtoSpan) -> dict[str, Any]:
    return {item.key: item.value.string_value or item.value.int_value for item in span.attributes}


def test_a_request_carries_no_trace_field_with_telemetry_off() -> None:
    data = encode_request("add", {"a": 1}, "sha256:ab")
    assert json.loads(data) == {
        "protocol": 1,
        "variant": "add",
        "arguments": {"a": 1},
        "descriptor": "sha256:ab",
    }
    assert decode_request(data).trace == {}


def test_a_request_carries_the_trace_context_it_is_given() -> None:
    data = encode_request("add", {}, "sha256:ab", {"traceparent": TRACEPARENT})
    assert json.loads(data)["trace"] == {"traceparent": TRACEPARENT}
    assert decode_request(data).trace == {"traceparent": TRACEPARENT}


@pytest.mark.parametrize(
    "trace",
    [["x"], {"baggage": "a=1"}, {"traceparent": 7}, {"traceparent": "0" * 1025}],
)
def test_a_malformed_trace_field_is_refused(trace: Any) -> None:
    message = {"protocol": 1, "variant": "a", "arguments": {}, "descriptor": "d", "trace": trace}
    with pytest.raises(ProtocolError) as caught:
        decode_request(json.dumps(message))
    assert caught.value.message == (
        "relocation protocol: request field 'trace' must be an object of W3C Trace Context "
        "strings (keys traceparent, tracestate; at most 1024 characters each)"
    )


def test_the_worker_span_continues_the_carried_context_and_names_a_refusal(
    exporter: InMemorySpanExporter,
) -> None:
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    toolset = Toolset()
    toolset.add(Tool.from_function(add))
    toolset.seal()
    digest = descriptor_digest(toolset["add"])
    carried = {"traceparent": TRACEPARENT}

    async def go() -> list[Any]:
        good = decode_request(encode_request("add", {"a": 1, "b": 2}, digest, carried))
        stale = decode_request(encode_request("add", {"a": 1, "b": 2}, "sha256:00", carried))
        return [await serve_request(toolset, good), await serve_request(toolset, stale)]

    served, refused = run(go())
    assert served.value == 3 and refused.failure is not None
    first, second = [
        s for s in exporter.get_finished_spans() if s.name == "toolproof.backend.run add"
    ]
    for span in (first, second):
        assert span.kind == SpanKind.SERVER and span.parent is not None
        assert (span.parent.trace_id, span.parent.span_id) == (
            0x4BF92F3577B34DA6A3CE929D0E0E4736,
            0x00F067AA0BA902B7,
        )
    assert first.attributes is not None and "error.type" not in first.attributes
    assert second.attributes is not None
    assert second.attributes["error.type"] == "descriptor_mismatch"
    assert second.attributes["toolproof.worker.pid"] == os.getpid()


TELEMETRY = "\n[telemetry]\nenabled = true\n"


def test_process_backend_worker_span_continues_the_submit_span(
    receiver: str, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n[tools.add]\n'
        'extensions = [["process"]]\n' + TELEMETRY,
    )

    async def go() -> Any:
        async with load_toolset(config) as toolset:
            return (await toolset["add_process"].call({"a": 2, "b": 3})).value

    assert run(go()) == 5  # closing the toolset ends the workers, which flush their spans
    outer = one(exporter, "execute_tool add_process")
    submit = one(exporter, "toolproof.backend.submit add")
    assert (submit.kind, submit.parent and submit.parent.span_id) == (
        SpanKind.CLIENT,
        outer.context and outer.context.span_id,
    )
    assert dict(submit.attributes or {}) == {
        "gen_ai.tool.name": "add",
        "toolproof.backend": "process",
    }
    worker = received("toolproof.backend.run add")
    trace_id, submit_id = wire_ids(submit)
    assert (worker.trace_id, worker.parent_span_id) == (trace_id, submit_id)
    assert worker.kind == ProtoSpan.SPAN_KIND_SERVER
    attributes = attributes_of(worker)
    assert attributes["gen_ai.tool.name"] == "add"
    assert (
        isinstance(attributes["toolproof.worker.pid"], int)
        and attributes["toolproof.worker.pid"] != os.getpid()
    )
    body = received("execute_tool add")
    assert (body.trace_id, body.parent_span_id) == (trace_id, worker.span_id)


def test_a_failed_call_marks_both_sides(
    receiver: str, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n[tools.fails]\n'
        'extensions = [["process"]]\n' + TELEMETRY,
    )

    async def go() -> Any:
        async with load_toolset(config) as toolset:
            return await toolset["fails_process"].call({"reason": "no"})

    result = run(go())
    assert result.failure is not None
    submit = one(exporter, "toolproof.backend.submit fails")
    assert submit.attributes is not None
    assert submit.attributes["error.type"] == result.failure.kind
    assert submit.status.status_code.name == "ERROR"
    worker = received("toolproof.backend.run fails")
    assert attributes_of(worker)["error.type"] == result.failure.kind


def test_celery_worker_span_continues_the_submit_span(
    receiver: str, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    require_redis()
    queue = f"otel-{os.getpid()}"  # a queue of its own: no other worker takes the task
    config = copy_fixture(
        tmp_path,
        '[[python]]\nmodule = "backend_tools"\n\n[tools.add]\nextensions = [["celery"]]\n\n'
        f'[backends.celery]\nbroker = "{REDIS_URL}"\nqueue = "{queue}"\n' + TELEMETRY,
    )
    log = tmp_path / "worker.log"
    with log.open("wb") as handle:
        worker = subprocess.Popen(
            [*TOOLPROOF, "worker", "--config", str(config), "--concurrency", "1"],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

        async def go() -> Any:
            async with load_toolset(config) as toolset:
                return (await toolset["add_celery"].call({"a": 20, "b": 22})).value

        assert run(go()) == 42
    finally:
        worker.send_signal(signal.SIGTERM)  # warm shutdown: the pool process flushes
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    submit = one(exporter, "toolproof.backend.submit add")
    assert submit.attributes is not None and submit.attributes["toolproof.backend"] == "celery"
    remote = received("toolproof.backend.run add")
    trace_id, submit_id = wire_ids(submit)
    assert (remote.trace_id, remote.parent_span_id) == (trace_id, submit_id)
    body = received("execute_tool add")
    assert (body.trace_id, body.parent_span_id) == (trace_id, remote.span_id)
