"""`verify --otel-spans` reads what the OpenTelemetry SDK's own exporters write (issue 30 item 25).

No collector: the spans of a recorded session go to a file through the SDK alone —
``ConsoleSpanExporter(out=file)`` (its default, indented ``ReadableSpan.to_json()``),
and the OTLP encoder of ``opentelemetry-exporter-otlp-proto-common`` printed by
``MessageToJson``, one request per export — and ``toolproof verify`` checks the file.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

import toolproof
from toolproof.adapters.telemetry.check import read_spans
from toolproof.adapters.telemetry.instrument import uninstrument
from toolproof.errors import InputError
from toolproof.identity import digest_json

TOOLPROOF = str(Path(sys.executable).parent / "toolproof")
FORGED = "sha256:" + "0" * 64


class OtlpJsonFile(SpanExporter):
    """What a user writes with the SDK's OTLP encoder: one JSON request per export."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.out.write(MessageToJson(encode_spans(spans)) + "\n")
        self.out.flush()
        return SpanExportResult.SUCCESS


def _record(root: Path, exporter: Callable[[IO[str]], SpanExporter], name: str) -> Path:
    """Record a session of two calls with the SDK exporting its spans to ``root/name``."""

    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is a fruit"

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(lookup))
    toolset.seal()

    async def main() -> Path:
        async with toolproof.record_session(toolset, root=root, task="fruit?") as session:
            await session.call("lookup", {"item": "apple"})
            await session.call("lookup", {"item": "pear"})
            session.answer('"apple is a fruit" [call_1]')
        assert session.run_id is not None
        return root / "runs" / session.run_id

    with (root / name).open("w", encoding="utf-8") as out:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter(out)))
        toolproof.instrument(tracer_provider=provider)
        try:
            run = asyncio.run(main())
        finally:
            uninstrument()
            provider.shutdown()
    return run


def _verify(run: Path, export: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOLPROOF, "verify", str(run), "--otel-spans", str(export)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(params=["console", "otlp"])
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    if request.param == "console":
        run = _record(tmp_path, lambda out: ConsoleSpanExporter(out=out), "spans.json")
    else:
        run = _record(tmp_path, OtlpJsonFile, "spans.json")
    yield run, tmp_path / "spans.json"


def test_a_file_the_sdk_exporter_wrote_verifies_against_the_run(
    recorded: tuple[Path, Path],
) -> None:
    run, export = recorded
    text = export.read_text(encoding="utf-8")
    assert text.startswith("{\n")  # indented documents one after another, not JSON lines
    assert text.count('"toolproof.call_id"') == 2
    done = _verify(run, export)
    assert (done.returncode, done.stderr) == (0, "")
    assert "otel spans: 2 spans of 6 match 2 recorded calls" in done.stdout
    spans = [s for s in read_spans(export) if "toolproof.call_id" in s["attributes"]]
    assert len(read_spans(export)) == 6
    assert [s["attributes"]["toolproof.arguments_digest"] for s in spans] == [
        digest_json({"item": "apple"}),
        digest_json({"item": "pear"}),
    ]
    assert spans[0]["start"] < spans[1]["start"]


def test_a_tampered_sdk_export_is_refused_naming_the_span_and_field(
    recorded: tuple[Path, Path],
) -> None:
    run, export = recorded
    text = export.read_text(encoding="utf-8")
    real = digest_json("pear is a fruit")
    assert text.count(real) == 1
    export.write_text(text.replace(real, FORGED), encoding="utf-8")
    done = _verify(run, export)
    assert done.returncode == 2, done.stdout + done.stderr
    second = [
        json.loads(line)["call_id"]
        for line in (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["type"] == "tool_called"
    ][1]
    assert re.search(
        rf"error: span 'execute_tool lookup' \([^)]+, call {second}\): "
        rf"toolproof\.result_digest is '{FORGED}', the run recorded '{real}'",
        " ".join(done.stderr.split()),
    ), done.stderr


def test_sdk_spans_one_per_line_out_of_the_recorded_order_are_refused(tmp_path: Path) -> None:
    def one_per_line(out: IO[str]) -> SpanExporter:
        return ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n")

    run = _record(tmp_path, one_per_line, "spans.jsonl")
    export = tmp_path / "spans.jsonl"
    lines = export.read_text(encoding="utf-8").splitlines()
    calls = [n for n, line in enumerate(lines) if "toolproof.call_id" in line]
    first, second = (json.loads(lines[n]) for n in calls)
    assert _verify(run, export).returncode == 0
    first["start_time"], second["start_time"] = second["start_time"], first["start_time"]
    lines[calls[0]], lines[calls[1]] = json.dumps(first), json.dumps(second)
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _verify(run, export)
    assert done.returncode == 2
    assert ": out of order: it started after the span of call" in " ".join(done.stderr.split())


def test_a_value_of_neither_form_is_refused_naming_its_line_and_both_rules(
    tmp_path: Path,
) -> None:
    export = tmp_path / "spans.json"
    export.write_text('{"resourceSpans": []}\n\n{"data": []}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_spans(export)
    assert str(caught.value) == (
        f"--otel-spans {export}: line 3: not an OTLP JSON trace export nor an SDK span "
        "(rule: an OTLP JSON ExportTraceServiceRequest object with 'resourceSpans'; or an "
        "OpenTelemetry SDK span as ConsoleSpanExporter and ReadableSpan.to_json() write "
        "it, with 'name', 'context.span_id', 'start_time' and 'attributes')"
    )


def test_a_malformed_sdk_span_is_refused_naming_its_line(tmp_path: Path) -> None:
    export = tmp_path / "spans.json"
    export.write_text(
        '[]\n{"name": "x", "context": {}, "start_time": null, "attributes": {}}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        read_spans(export)
    assert str(caught.value) == (
        f"--otel-spans {export}: line 2: a malformed span (KeyError('span_id'))"
    )


def test_text_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    export = tmp_path / "spans.json"
    export.write_text('{"resourceSpans": []}\n{"resourceSpans": \n  oops}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_spans(export)
    assert str(caught.value) == f"--otel-spans {export}: line 3 is not JSON: Expecting value"
