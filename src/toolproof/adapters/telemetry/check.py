"""Check an OpenTelemetry span export against a sealed run (``verify --otel-spans``).

The export is OTLP JSON (the ``ExportTraceServiceRequest`` JSON mapping of the OTLP
specification 1.x: ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``), one
document or one per line (the collector's ``file`` exporter). Every span whose
``toolproof.call_id`` names a call of the run must carry that call's recorded
``toolproof.arguments_digest``, its ``toolproof.result_digest`` (a call that
succeeded) or ``error.type`` (one that failed), and the spans, ordered by start time,
must claim the calls in the run's recorded order. Spans of other runs are ignored.
This module needs no OpenTelemetry package: it reads JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolproof.bundle.trace import read_trace
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.trace import ToolCalled, ToolReturned
from toolproof.errors import InputError, VerificationError
from toolproof.identity import digest_json

__all__ = ["SpanCheck", "check_spans", "read_spans"]


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


def _value(value: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])  # OTLP JSON carries int64 as a string
    return None


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Read every span of an OTLP JSON export, attributes flattened into a dict.

    Args:
        path: the export: one ``ExportTraceServiceRequest`` JSON document, or JSON lines.

    Returns:
        ``{"name", "span_id", "start", "attributes"}`` per span, in file order.

    Raises:
        InputError: the file cannot be read or is not OTLP JSON (the message names the
            line and the rule).

    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--otel-spans {path}: cannot read: {exc.strerror or exc}") from exc
    try:
        documents = [json.loads(text)]
    except json.JSONDecodeError:
        documents = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    documents.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"--otel-spans {path}: line {number} is not JSON: {exc.msg}"
                    ) from exc
    spans = []
    for document in documents:
        if not isinstance(document, dict) or "resourceSpans" not in document:
            raise InputError(
                f"--otel-spans {path}: not an OTLP JSON trace export (rule: an "
                "ExportTraceServiceRequest object with 'resourceSpans')"
            )
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
        export: the OTLP JSON span export.

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
