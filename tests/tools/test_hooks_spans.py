"""The span helpers of :mod:`toolproof.tools.hooks` that code below ``adapters`` calls."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from toolproof.tools import hooks

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_with_telemetry_off_the_helpers_do_nothing() -> None:
    assert hooks.LAYER is hooks.OFF
    with hooks.span("toolproof.approval.wait t", {"a": 1}) as span:
        span.set_attribute("b", 2)
        hooks.fail(span, "timeout", "late")
    assert span is hooks.NO_SPAN
    assert hooks.carrier() == {}
    with hooks.model_turn("smollm2") as turn:
        assert turn is hooks.NO_SPAN
    hooks.flush()


def test_a_model_turn_is_a_genai_client_span(exporter: InMemorySpanExporter) -> None:
    with hooks.model_turn("smollm2", provider="llama.cpp", attributes={"toolproof.turn": 1}) as s:
        s.set_attribute("gen_ai.usage.output_tokens", 7)
    [span] = exporter.get_finished_spans()
    assert (span.name, span.kind) == ("chat smollm2", SpanKind.CLIENT)
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "smollm2",
        "gen_ai.provider.name": "llama.cpp",
        "toolproof.turn": 1,
        "gen_ai.usage.output_tokens": 7,
    }


def test_carrier_names_the_current_span_and_a_parent_carrier_continues_it(
    exporter: InMemorySpanExporter,
) -> None:
    with hooks.span("outer") as outer:
        sent = hooks.carrier()
    context = outer.get_span_context()  # type: ignore[attr-defined]
    flags = f"{context.trace_flags:02x}"
    assert sent == {"traceparent": f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags}"}
    with (
        hooks.span("ambient"),
        hooks.span("remote", kind="server", parent={"traceparent": TRACEPARENT}) as remote,
    ):
        hooks.fail(remote, "tool_error", "boom")
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    received = by_name["remote"]
    assert received.parent is not None
    assert (received.parent.trace_id, received.parent.span_id) == (
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0x00F067AA0BA902B7,
    )
    ambient = by_name["ambient"].context
    assert ambient is not None
    assert [link.context.span_id for link in received.links] == [ambient.span_id]
    assert received.attributes is not None and received.attributes["error.type"] == "tool_error"
    # content capture is off: the description is the error type, not the message
    assert (received.status.status_code.name, received.status.description) == (
        "ERROR",
        "tool_error",
    )


def test_a_carrier_without_a_valid_traceparent_leaves_the_current_span_the_parent(
    exporter: InMemorySpanExporter,
) -> None:
    with hooks.span("outer"), hooks.span("inner", parent={"traceparent": "garbage"}):
        pass
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    outer = by_name["outer"].context
    assert outer is not None and by_name["inner"].parent is not None
    assert by_name["inner"].parent.span_id == outer.span_id
    assert by_name["inner"].links == ()
