"""Check an OpenTelemetry span export against a sealed run (``verify --otel-spans``).

The export is OTLP JSON (the ``ExportTraceServiceRequest`` JSON mapping of the OTLP
specification 1.x: ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``), one
document or one per line (the collector's ``file`` exporter), or the OpenTelemetry SDK's
own span JSON (``ConsoleSpanExporter(out=file)``): see :func:`read_spans`. Every span whose
``toolproof.call_id`` names a call of the run must carry that call's recorded
``toolproof.arguments_digest``, its ``toolproof.result_digest`` (a call that
succeeded) or ``error.type`` (one that failed), and the spans, ordered by start time,
must claim the calls in the run's recorded order. Spans of other runs are ignored.
This module needs no OpenTelemetry package: it reads JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from toolproof.bundle.trace import read_trace
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.trace import ToolCalled, ToolReturned
from toolproof.errors import InputError, VerificationError
from toolproof.identity import digest_json

__all__ = ["OTLP_RULE", "SDK_RULE", "SpanCheck", "check_spans", "read_spans"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SpanCheck:
    """What :func:`check_spans` matched.

    Attributes:
        spans: spans in the export.
        matched: spans that claim a call of the run (all of them matched).
        calls: calls recorded in the run.

    """

    spans: int
    matched: int
    calls: int

    def to_json(self) -> dict[str, int]:
        """``{"spans", "matched", "calls"}``."""
        return {"spans": self.spans, "matched": self.matched, "calls": self.calls}

    def describe(self) -> str:
        """``2 spans of 7 match 2 recorded calls``."""
        plural = "" if self.matched == 1 else "s"
        calls = "call" if self.calls == 1 else "calls"
        return f"{self.matched} span{plural} of {self.spans} match {self.calls} recorded {calls}"


OTLP_RULE = "an OTLP JSON ExportTraceServiceRequest object with 'resourceSpans'"
SDK_RULE = (
    "an OpenTelemetry SDK span as ConsoleSpanExporter and ReadableSpan.to_json() write it, "
    "with 'name', 'context.span_id', 'start_time' and 'attributes'"
)
_SDK_KEYS = frozenset({"name", "context", "start_time", "attributes"})


def _value(value: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])  # OTLP JSON carries int64 as a string
    return None


def _json_values(text: str, path: Path) -> list[tuple[int, Any]]:
    """Every JSON value of ``text`` with the 1-based line it starts on.

    Values are separated by whitespace only: one document, JSON lines, or documents
    printed with indentation one after another (``ConsoleSpanExporter``'s default).
    """
    decoder = json.JSONDecoder()
    values: list[tuple[int, Any]] = []
    index, line, counted = 0, 1, 0
    while True:
        while index < len(text) and text[index] in " \t\r\n":
            index += 1
        if index == len(text):
            return values
        line += text.count("\n", counted, index)
        counted = index
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"--otel-spans {path}: line {exc.lineno} is not JSON: {exc.msg}"
            ) from exc
        values.append((line, value))


def _otlp_spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of one OTLP JSON ``ExportTraceServiceRequest``."""
    spans = []
    for resource in document["resourceSpans"]:
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                attributes = {
                    item["key"]: _value(item.get("value", {}))
                    for item in span.get("attributes", [])
                }
                spans.append(
                    {
                        "name": span.get("name", ""),
                        "span_id": span.get("spanId", ""),
                        "start": int(span.get("startTimeUnixNano", 0)),
                        "attributes": attributes,
                    }
                )
    return spans


def _sdk_span(span: dict[str, Any]) -> dict[str, Any]:
    """One span as the SDK's ``ReadableSpan.to_json()`` writes it (times to the microsecond)."""
    start = 0
    if span["start_time"] is not None:
        when = datetime.strptime(span["start_time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        start = (when - EPOCH) // timedelta(microseconds=1) * 1000
    if not isinstance(span["attributes"], dict):
        raise TypeError(f"'attributes' is a {type(span['attributes']).__name__}, not an object")
    return {
        "name": str(span["name"]),
        "span_id": str(span["context"]["span_id"]),
        "start": start,
        "attributes": dict(span["attributes"]),
    }


def _spans_of(value: Any, where: str) -> list[dict[str, Any]]:
    """The spans of one JSON value of the file (an array: of each of its items)."""
    if isinstance(value, list):
        return [span for item in value for span in _spans_of(item, where)]
    try:
        if isinstance(value, dict) and "resourceSpans" in value:
            return _otlp_spans(value)
        if isinstance(value, dict) and value.keys() >= _SDK_KEYS:
            return [_sdk_span(value)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{where}: a malformed span ({exc!r})") from exc
    raise InputError(
        f"{where}: not an OTLP JSON trace export nor an SDK span (rule: {OTLP_RULE}; or {SDK_RULE})"
    )


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Read every span of a span export file, attributes flattened into a dict.

    Two forms are read, mixed freely, each value separated from the next by whitespace:

    * OTLP JSON: ``ExportTraceServiceRequest`` documents (OTLP specification 1.x JSON
      mapping), one per line as the collector's ``file`` exporter writes them, or as
      ``google.protobuf.json_format.MessageToJson`` prints them, one after another;
    * the OpenTelemetry SDK's own span JSON: what ``ConsoleSpanExporter(out=file)``
      writes (``ReadableSpan.to_json()``, indented, one span after another) or one
      span per line; its start times are to the microsecond.

    A JSON array is read as its items, in order.

    Args:
        path: the export file (UTF-8).

    Returns:
        ``{"name", "span_id", "start", "attributes"}`` per span, in file order;
        ``start`` in nanoseconds since the Unix epoch.

    Raises:
        InputError: the file cannot be read, a value is not JSON, or a value is neither
            form (the message names the file, the line and the rule).

    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc.reason
        raise InputError(f"--otel-spans {path}: cannot read: {reason or exc}") from exc
    spans = []
    for line, value in _json_values(text, path):
        spans.extend(_spans_of(value, f"--otel-spans {path}: line {line}"))
    return spans


def _recorded_calls(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(call_id, expected attributes)`` for each call of the run, in recorded order."""
    lines, _ = read_trace((directory / TRACE_FILE).read_bytes())
    order: list[str] = []
    expected: dict[str, dict[str, Any]] = {}
    for line in lines:
        event = line.event
        if isinstance(event, ToolCalled):
            order.append(event.call_id)
            expected[event.call_id] = {
                "toolproof.arguments_digest": digest_json(event.call.arguments),
                "gen_ai.tool.name": event.call.tool,
            }
        elif isinstance(event, ToolReturned) and event.call_id in expected:
            failure = event.result.failure
            if failure is None:
                expected[event.call_id]["toolproof.result_digest"] = digest_json(event.result.value)
            else:
                expected[event.call_id]["error.type"] = failure.kind
    return [(call_id, expected[call_id]) for call_id in order]


def check_spans(directory: Path, export: Path) -> SpanCheck:
    """Check the spans of ``export`` that claim calls of the run in ``directory``.

    Args:
        directory: a run directory (already verified: its trace is intact).
        export: the span export (OTLP JSON or the SDK's span JSON, :func:`read_spans`).

    Returns:
        The :class:`SpanCheck` counts.

    Raises:
        InputError: the export cannot be read (see :func:`read_spans`).
        VerificationError: a span claiming a call of the run disagrees with the
            record; the message names the span (name and id), the field, both values.

    """
    spans = read_spans(export)
    calls = _recorded_calls(directory)
    expected = dict(calls)
    position = {call_id: index for index, (call_id, _) in enumerate(calls)}
    claiming = sorted(
        (span for span in spans if span["attributes"].get("toolproof.call_id") in expected),
        key=lambda span: span["start"],
    )
    last = -1
    for span in claiming:
        attributes = span["attributes"]
        call_id = attributes["toolproof.call_id"]
        label = f"span {span['name']!r} ({span['span_id']}, call {call_id})"
        for field, value in expected[call_id].items():
            if attributes.get(field) != value:
                raise VerificationError(
                    f"{label}: {field} is {attributes.get(field)!r}, the run recorded {value!r}",
                    span=span["span_id"],
                    field=field,
                )
        if position[call_id] < last:
            raise VerificationError(
                f"{label}: out of order: it started after the span of call "
                f"{calls[last][0]}, which the run recorded later",
                span=span["span_id"],
                field="startTimeUnixNano",
            )
        last = position[call_id]
    return SpanCheck(len(spans), len(claiming), len(calls))
