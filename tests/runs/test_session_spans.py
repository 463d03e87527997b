"""An agent session's tool spans name the calls the session records, so --otel-spans checks them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolproof
from toolproof.adapters.telemetry.check import check_spans
from toolproof.errors import VerificationError


def _toolset() -> toolproof.Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is a fruit"

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(lookup))
    toolset.seal()
    return toolset


def _record(root: Path) -> Path:
    async def main() -> Path:
        async with toolproof.record_session(_toolset(), root=root, task="fruit?") as session:
            first = await session.toolset["lookup"].call({"item": "apple"})
            second = await session.toolset["lookup"].call({"item": "pear"})
            session.answer(f"{first.value}; {second.value}")
        return root / "runs" / session.run_id

    return asyncio.run(main())


def _export(exporter: InMemorySpanExporter, path: Path) -> Path:
    spans = exporter.get_finished_spans()
    request = ExportTraceServiceRequest(resource_spans=encode_spans(spans).resource_spans)
    path.write_text(json.dumps(MessageToDict(request)), encoding="utf-8")
    return path


def test_each_session_call_span_carries_the_recorded_call_id(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    run = _record(tmp_path)
    called = [
        json.loads(line)
        for line in (run / "trace.jsonl").read_bytes().splitlines()
        if json.loads(line)["type"] == "tool_called"
    ]
    tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup"]
    assert [s.attributes["toolproof.call_id"] for s in tools] == [e["call_id"] for e in called]
    check = check_spans(run, _export(exporter, tmp_path / "spans.json"))
    assert (check.matched, check.calls) == (2, 2)


def test_a_forged_session_span_fails_the_check_naming_it(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    run = _record(tmp_path)
    export = _export(exporter, tmp_path / "spans.json")
    text = export.read_text(encoding="utf-8")
    data = json.loads(text)
    for scope in data["resourceSpans"][0]["scopeSpans"]:
        for span in scope["spans"]:
            for attribute in span["attributes"]:
                if attribute["key"] == "toolproof.result_digest":
                    attribute["value"]["stringValue"] = "sha256:" + "0" * 64
    export.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(VerificationError, match=r"toolproof\.result_digest is 'sha256:0{64}'"):
        check_spans(run, export)
