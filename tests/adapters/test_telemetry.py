"""OpenTelemetry spans and metrics (issue 20): names, attributes, parent links, evidence links.

Spans land in the SDK's real ``InMemorySpanExporter``; one test exports OTLP/HTTP to a
real receiver on 127.0.0.1 (built on ``opentelemetry-proto``) and reads the spans back.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolproof
from toolproof import Tool, ToolCallError, ToolFailure, Toolset
from toolproof.config import load_config
from toolproof.contract.runs import RunSpec
from toolproof.extensions import ComboElement, build_combo
from toolproof.identity import digest_json
from toolproof.runs.run import execute_run
from toolproof.tools import hooks

TOOLPROOF = str(Path(sys.executable).parent / "toolproof")


class Otel:
    """An instrumented SDK: real providers, in-memory span exporter and metric reader."""

    def __init__(self, capture_content: bool = False, redact: tuple[str, ...] = ()) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        toolproof.instrument(
            tracer_provider=self.provider,
            meter_provider=self.meters,
            capture_content=capture_content,
            redact=redact,
        )

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = list(metric.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    made = Otel()
    yield made
    toolproof.adapters.telemetry.instrument.uninstrument()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def _add(arguments: dict[str, Any]) -> Any:
    return arguments["a"] + 1


def add_tool() -> Tool:
    async def add(a: int) -> int:
        """Add one."""
        return a + 1

    return Tool.from_function(add)


def test_telemetry_is_a_layer_instrument_installs_not_a_flag() -> None:
    assert hooks.LAYER is hooks.OFF
    assert not hasattr(hooks, "ACTIVE")  # no global "is telemetry on" for code to branch on
    toolproof.instrument()
    try:
        assert hooks.LAYER is not hooks.OFF
        assert hooks.install(hooks.LAYER) is hooks.LAYER  # the hook it replaces
    finally:
        toolproof.adapters.telemetry.instrument.uninstrument()
    assert hooks.LAYER is hooks.OFF
    assert hooks.install(None) is None  # telemetry was off: no hook replaced


def test_a_plain_call_is_one_execute_tool_span(otel: Otel) -> None:
    result = asyncio.run(add_tool().call({"a": 41}))
    assert result.value == 42
    [span] = otel.spans()
    assert span.name == "execute_tool add"
    attributes = dict(span.attributes or {})
    call_id = attributes.pop("gen_ai.tool.call.id")
    assert isinstance(call_id, str) and call_id.startswith("call_")
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add one.",
        "toolproof.arguments_digest": digest_json({"a": 41}),
        "toolproof.result_digest": digest_json(42),
    }
    assert span.parent is None
    metrics = otel.metrics()
    [point] = metrics["toolproof.tool.duration"]
    assert (point.count, dict(point.attributes)) == (1, {"gen_ai.tool.name": "add"})
    assert "toolproof.tool.failures" not in metrics


def test_a_failing_call_sets_error_type_and_counts_the_failure(otel: Otel) -> None:
    async def broken(a: int) -> int:
        """Fail."""
        raise ToolCallError(ToolFailure(kind="unavailable", message="down", where="body"))

    result = asyncio.run(Tool.from_function(broken).call({"a": 1}))
    assert result.failure is not None and result.failure.kind == "unavailable"
    refused = asyncio.run(Tool.from_function(broken).call({"a": "x"}))
    assert refused.failure is not None and refused.failure.kind == "invalid_arguments"
    first, second = otel.spans()
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["error.type"] == "unavailable"
    assert "toolproof.result_digest" not in first.attributes
    # content capture is off: the status names the kind, never the message (issue 30 item 4)
    assert (first.status.status_code.name, first.status.description) == ("ERROR", "unavailable")
    assert second.attributes["error.type"] == "invalid_arguments"
    failures = {
        dict(point.attributes)["error.type"]: point.value
        for point in otel.metrics()["toolproof.tool.failures"]
    }
    assert failures == {"unavailable": 1, "invalid_arguments": 1}


def test_variant_layers_are_nested_spans_with_one_per_retry_attempt(otel: Otel) -> None:
    outcomes: list[Any] = [RuntimeError("flaky"), 2]

    async def flaky(a: int) -> int:
        """Flaky."""
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return int(outcome)

    base = Tool.from_function(flaky)
    combo = (
        ComboElement(name="timeout", config={"seconds": 5}),
        ComboElement(name="retry", config={"backoff": 0, "force": True}),
    )
    variant = build_combo(base, combo)[-1][1]
    result = asyncio.run(variant.call({"a": 1}))
    assert result.value == 2
    spans = otel.spans()
    outer = spans[0]
    assert outer.attributes is not None
    assert (outer.name, outer.attributes["gen_ai.tool.type"]) == (
        f"execute_tool {variant.name}",
        "extension",
    )
    assert outer.attributes["toolproof.layer"] == "retry"
    assert outer.attributes["toolproof.base"] == "flaky"
    # retry ran its inner (the timeout layer) twice: two children of the retry span
    timeouts = [
        s for s in spans if s.attributes and s.attributes.get("toolproof.layer") == "timeout"
    ]
    assert [parent_of(s) for s in timeouts] == [span_id(outer)] * 2
    bases = [s for s in spans if s.name == "execute_tool flaky"]
    assert [parent_of(s) for s in bases] == [span_id(t) for t in timeouts]
    assert [b.attributes.get("error.type") for b in bases if b.attributes] == ["tool_error", None]
    # only the outermost span names the call
    assert [("gen_ai.tool.call.id" in (s.attributes or {})) for s in spans].count(True) == 1
    assert len(spans) == 5


def stock_toolset() -> Toolset:
    async def stock(item: str) -> dict[str, Any]:
        """Look up stock."""
        if item == "pear":
            raise KeyError("no such item: pear")
        return {"item": item, "count": 12 if item == "apple" else 7}

    toolset = Toolset()
    toolset.add(Tool.from_function(stock))
    return toolset.seal()


SPEC: dict[str, Any] = {
    "task": "Count the fruit.",
    "steps": [
        {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
        {"id": "plums", "tool": "stock", "arguments": {"item": "plum"}},
    ],
    "reasoner": {
        "name": "tool-results",
        "min_supports": 1,
        "params": {
            "claims": [
                {
                    "statement": "There are {count} apples.",
                    "cite": {"count": "steps.apples.value.count"},
                }
            ]
        },
    },
    "seed": 1,
}


def recorded_calls(run_dir: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    return [event for event in events if event["type"] == "tool_called"]


def make_run(root: Path) -> Path:
    spec = RunSpec.model_validate(SPEC)
    outcome = asyncio.run(execute_run(spec, root=root, toolset=stock_toolset()))
    assert outcome.report.outcome == "passed"
    return Path(outcome.path)


def test_a_run_is_a_run_span_with_step_spans_and_call_spans_named_by_call_id(
    otel: Otel, tmp_path: Path
) -> None:
    run_dir = make_run(tmp_path)
    [run_span] = otel.named("toolproof.run")
    assert run_span.attributes is not None
    assert run_span.attributes["toolproof.run_id"] == run_dir.name
    plan = json.loads((run_dir / "plan.json").read_text())
    assert run_span.attributes["toolproof.plan_id"] == plan["id"]
    steps = [s for s in otel.spans() if s.name.startswith("toolproof.step ")]
    assert [s.name for s in steps] == [
        f"toolproof.step {node['id']}" for node in plan["nodes"] if node["kind"] != "finalize"
    ]
    assert {parent_of(s) for s in steps} == {span_id(run_span)}
    calls = otel.named("execute_tool stock")
    assert [s.attributes["toolproof.call_id"] for s in calls if s.attributes] == [
        event["call_id"] for event in recorded_calls(run_dir)
    ]
    by_step = {s.attributes["toolproof.step"]: span_id(s) for s in steps if s.attributes}
    assert [parent_of(s) for s in calls] == [by_step["apples"], by_step["plums"]]
    first = recorded_calls(run_dir)[0]
    assert calls[0].attributes is not None
    assert calls[0].attributes["gen_ai.tool.call.id"] == first["call_id"]
    assert calls[0].attributes["toolproof.arguments_digest"] == digest_json({"item": "apple"})


def test_content_is_off_by_default(otel: Otel) -> None:
    asyncio.run(add_tool().call({"a": 1}))
    [span] = otel.spans()
    assert not {"toolproof.arguments", "toolproof.result"} & set(span.attributes or {})


def test_captured_content_goes_through_the_audit_redaction() -> None:
    made = Otel(capture_content=True, redact=("/token",))
    try:

        async def login(user: str, token: str) -> str:
            """Log in."""
            return f"hello {user}"

        asyncio.run(Tool.from_function(login).call({"user": "ada", "token": "s3cret"}))
        [span] = made.spans()
        assert span.attributes is not None
        arguments = json.loads(str(span.attributes["toolproof.arguments"]))
        assert arguments == {
            "token": {"redacted": "string", "digest": digest_json("s3cret")},
            "user": "ada",
        }
        assert span.attributes["toolproof.result"] == '"hello ada"'
        assert "s3cret" not in json.dumps(dict(span.attributes))
    finally:
        toolproof.adapters.telemetry.instrument.uninstrument()


def test_a_redact_entry_that_is_not_a_pointer_is_refused() -> None:
    with pytest.raises(toolproof.UsageError) as caught:
        toolproof.instrument(redact=("token",))
    assert str(caught.value) == (
        "instrument(redact=...): 'token' is not a JSON Pointer (RFC 6901: starts with '/')"
    )
    assert hooks.LAYER is hooks.OFF


def otlp_json(spans: list[ReadableSpan]) -> dict[str, Any]:
    """The OTLP JSON form of ``spans`` (the proto's JSON mapping)."""
    return MessageToDict(
        ExportTraceServiceRequest(resource_spans=encode_spans(spans).resource_spans)
    )


def verify(root: Path, run_dir: Path, export: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLPROOF, "verify", run_dir.name, "--root", str(root), "--otel-spans", str(export)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_verify_otel_spans_accepts_a_matching_export_and_refuses_a_tampered_one(
    otel: Otel, tmp_path: Path
) -> None:
    run_dir = make_run(tmp_path)
    document = otlp_json(otel.spans())
    export = tmp_path / "spans.json"
    export.write_text(json.dumps(document))
    done = verify(tmp_path, run_dir, export)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "otel spans: 2 spans of 7 match 2 recorded calls" in done.stdout

    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    [apples] = [
        s
        for s in spans
        if any(
            a["key"] == "toolproof.arguments_digest"
            and a["value"]["stringValue"] == digest_json({"item": "apple"})
            for a in s["attributes"]
        )
    ]
    for item in apples["attributes"]:
        if item["key"] == "toolproof.result_digest":
            item["value"]["stringValue"] = digest_json({"item": "apple", "count": 13})
    export.write_text(json.dumps(document))
    done = verify(tmp_path, run_dir, export)
    assert done.returncode == 2
    message = " ".join(done.stderr.split())
    call_id = recorded_calls(run_dir)[0]["call_id"]
    assert (
        f"span 'execute_tool stock' ({apples['spanId']}, call {call_id}): "
        f"toolproof.result_digest is '{digest_json({'item': 'apple', 'count': 13})}', "
        f"the run recorded '{digest_json({'item': 'apple', 'count': 12})}'"
    ) in message


def test_verify_otel_spans_refuses_spans_out_of_recorded_order(otel: Otel, tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    document = otlp_json(otel.spans())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    calls = [s for s in spans if s["name"] == "execute_tool stock"]
    calls[0]["startTimeUnixNano"], calls[1]["startTimeUnixNano"] = (
        calls[1]["startTimeUnixNano"],
        calls[0]["startTimeUnixNano"],
    )
    export = tmp_path / "spans.json"
    export.write_text(json.dumps(document))
    done = verify(tmp_path, run_dir, export)
    assert done.returncode == 2
    assert "out of order" in done.stderr


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


def test_spans_export_over_otlp_http_to_a_real_receiver() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider = TracerProvider()
    endpoint = f"http://127.0.0.1:{server.server_port}/v1/traces"
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    toolproof.instrument(tracer_provider=provider)
    try:
        asyncio.run(add_tool().call({"a": 1}))
        provider.force_flush()
    finally:
        toolproof.adapters.telemetry.instrument.uninstrument()
        provider.shutdown()
        server.shutdown()
        server.server_close()
    [request] = _Receiver.requests
    [span] = request.resource_spans[0].scope_spans[0].spans
    attributes = {item.key: item.value.string_value for item in span.attributes}
    assert span.name == "execute_tool add"
    assert request.resource_spans[0].scope_spans[0].scope.name == "toolproof"
    assert attributes["toolproof.result_digest"] == digest_json(2)


def test_import_toolproof_imports_no_opentelemetry() -> None:
    code = (
        "import toolproof, sys; "
        "assert not any(m.startswith('opentelemetry') for m in sys.modules), "
        "sorted(m for m in sys.modules if m.startswith('opentelemetry'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


CLI_TOOLS = '''
import toolproof


@toolproof.tool(read_only=True)
def lookup(item: str) -> dict:
    """Look an item up."""
    return {"item": item, "count": len(item)}
'''


def test_toolproof_run_with_telemetry_enabled_exports_spans_that_verify(tmp_path: Path) -> None:
    """``[telemetry] enabled`` in toolproof.toml: a real ``toolproof run`` sends OTLP/HTTP
    to the endpoint of the standard variable; the spans received check against the run."""
    (tmp_path / "cli_tools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text(
        '[[python]]\nmodule = "cli_tools"\n\n[telemetry]\nenabled = true\n', encoding="utf-8"
    )
    (tmp_path / "spec.toml").write_text(
        'task = "t"\n[[steps]]\nid = "look"\ntool = "lookup"\narguments = { item = "pear" }\n',
        encoding="utf-8",
    )
    _Receiver.requests.clear()
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_port}/v1/traces"
    try:
        ran = subprocess.run(
            [TOOLPROOF, "run", str(tmp_path / "spec.toml"), "--root", str(tmp_path), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint},
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    names = sorted(
        span.name
        for request in _Receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    )
    assert names == [
        "execute_tool lookup",
        "toolproof.run",
        "toolproof.step derive",
        "toolproof.step look",
        "toolproof.step verify",
    ]
    export = tmp_path / "spans.jsonl"
    export.write_text(
        "".join(json.dumps(MessageToDict(request)) + "\n" for request in _Receiver.requests)
    )
    done = verify(tmp_path, tmp_path / "runs" / run_id, export)
    assert done.returncode == 0, done.stderr
    assert "otel spans: 1 span of 5 match 1 recorded call" in done.stdout


def test_telemetry_section_is_checked_by_the_config_loader(tmp_path: Path) -> None:
    path = tmp_path / "toolproof.toml"
    path.write_text('[telemetry]\nenabled = true\ncapture_content = true\nredact = ["/key"]\n')
    config, _ = load_config(path)
    assert (config.telemetry.enabled, config.telemetry.capture_content) == (True, True)
    assert config.telemetry.redact == ("/key",)
    path.write_text('[telemetry]\nredact = ["key"]\n')
    with pytest.raises(toolproof.ConfigError) as caught:
        load_config(path)
    assert "telemetry.redact" in str(caught.value)
    assert "'key' is not a JSON Pointer (RFC 6901: starts with '/')" in str(caught.value)
