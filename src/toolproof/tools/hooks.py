"""The telemetry layer: every tool call runs through :data:`LAYER`, set by ``instrument``.

:func:`toolproof.instrument` (the OpenTelemetry adapter, ``toolproof[otel]``) installs
a :class:`TelemetryHook` here with :func:`install`, as pydantic-ai's
``InstrumentedModel`` wraps a model; until then :data:`LAYER` is :data:`OFF`, the
layer that runs each call as it is and hands out :data:`NO_SPAN`. A tool call always
takes the same path (``LAYER.tool_call(tool, arguments, run)``), with or without
telemetry. The floors below ``adapters`` (``tools``, ``runs``) report through this
layer and never import OpenTelemetry or the adapter.

The outermost tool span of a call a run or a session is recording carries its
``ToolCall`` content id (``toolproof.call_id``), read from the call's scope
(:func:`toolproof.tools.observe.current_call`).

:func:`span`, :func:`carrier` and :func:`fail` are what code below ``adapters`` calls to
trace one operation of its own (an MCP request, a backend submit, an approval wait, a
model turn): they go through :data:`LAYER`, which with telemetry off does nothing. A
*carrier* is the W3C Trace Context of a span as text (``{"traceparent": ...,
"tracestate": ...}``, https://www.w3.org/TR/trace-context/), the form that travels in
MCP ``params._meta`` and in backend requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal, Protocol

from toolproof.contract.tools import ToolResult

__all__ = [
    "LAYER",
    "NO_SPAN",
    "OFF",
    "Span",
    "SpanKind",
    "TelemetryHook",
    "carrier",
    "fail",
    "flush",
    "install",
    "model_turn",
    "span",
]

SpanKind = Literal["internal", "client", "server", "producer", "consumer"]
"""The OpenTelemetry span kinds, by their lower-case names."""


class Span(Protocol):
    """The part of a span the lower floors use: set one attribute."""

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        """Set attribute ``key`` to ``value`` (OpenTelemetry attribute types)."""


class _NoSpan:
    """The span handed out while telemetry is off: attributes go nowhere."""

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        """Ignore the attribute."""

    def __repr__(self) -> str:
        return "NO_SPAN"


NO_SPAN: Span = _NoSpan()
"""What :func:`span` yields with telemetry off."""


class TelemetryHook(Protocol):
    """What the call path and the executor report to (the OpenTelemetry adapter)."""

    def tool_call(
        self,
        tool: Any,
        arguments: dict[str, Any],
        run: Callable[[Any, dict[str, Any]], Awaitable[ToolResult]],
    ) -> Awaitable[ToolResult]:
        """Run ``run(tool, arguments)`` inside a tool-call span; return its result."""

    def refused(self, tool: Any, arguments: Any, result: ToolResult) -> ToolResult:
        """Record a call refused before its body ran (``invalid_arguments``); return ``result``."""

    def span(
        self,
        name: str,
        attributes: Mapping[str, str | int],
        *,
        kind: SpanKind = "internal",
        parent: Mapping[str, str] | None = None,
    ) -> AbstractContextManager[Span]:
        """A span named ``name`` around a block (a run, a step), current inside it.

        ``parent``: a carrier (``traceparent``/``tracestate``) received from another
        process; the span continues that trace. ``None`` or a carrier without a valid
        ``traceparent``: the current span is the parent.
        """

    def carrier(self) -> dict[str, str]:
        """The W3C Trace Context of the current span (``{}`` when there is none)."""

    def fail(self, span: Span, error_type: str, message: str) -> None:
        """Mark ``span`` failed: ``error.type = error_type``, status ``ERROR`` with ``message``."""

    def flush(self, timeout: float) -> None:
        """Export the spans still buffered, waiting at most ``timeout`` seconds."""


class _Off:
    """The telemetry layer while telemetry is off: calls run as they are, spans go nowhere."""

    def tool_call(
        self,
        tool: Any,
        arguments: dict[str, Any],
        run: Callable[[Any, dict[str, Any]], Awaitable[ToolResult]],
    ) -> Awaitable[ToolResult]:
        """Return ``run(tool, arguments)`` itself."""
        return run(tool, arguments)

    def refused(self, tool: Any, arguments: Any, result: ToolResult) -> ToolResult:
        """Return ``result``."""
        return result

    def span(
        self,
        name: str,
        attributes: Mapping[str, str | int],
        *,
        kind: SpanKind = "internal",
        parent: Mapping[str, str] | None = None,
    ) -> AbstractContextManager[Span]:
        """A context manager yielding :data:`NO_SPAN`."""
        return nullcontext(NO_SPAN)

    def carrier(self) -> dict[str, str]:
        """``{}``: there is no span to carry."""
        return {}

    def fail(self, span: Span, error_type: str, message: str) -> None:
        """Nothing: there is no span to mark."""

    def flush(self, timeout: float) -> None:
        """Nothing: there is nothing buffered."""

    def __repr__(self) -> str:
        return "OFF"


OFF: TelemetryHook = _Off()
"""The layer in :data:`LAYER` while telemetry is off."""

LAYER: TelemetryHook = OFF
"""The telemetry layer every tool call and span goes through (:data:`OFF` until
:func:`install` puts a hook here). Code reports through it and never asks whether
telemetry is on: with :data:`OFF` each report is the call itself or a no-op."""


def install(hook: TelemetryHook | None) -> TelemetryHook | None:
    """Install ``hook`` as :data:`LAYER` (``None``: :data:`OFF`).

    Returns:
        The hook it replaces, or ``None`` when telemetry was off.

    """
    global LAYER
    previous = None if LAYER is OFF else LAYER
    LAYER = OFF if hook is None else hook
    return previous


def span(
    name: str,
    attributes: Mapping[str, str | int] | None = None,
    *,
    kind: SpanKind = "internal",
    parent: Mapping[str, str] | None = None,
) -> AbstractContextManager[Span]:
    """A span ``name`` around the block when telemetry is on; :data:`NO_SPAN` otherwise.

    For the operations a lower floor traces itself: an approval wait
    (``span("toolproof.approval.wait t_approve", {"toolproof.call_id": ...})``), a
    model turn, an MCP request (``kind="client"``), a backend submit.

    Args:
        name: the span name (low cardinality: ``"{operation} {target}"``).
        attributes: the span's first attributes (more with ``set_attribute``).
        kind: the OpenTelemetry span kind.
        parent: a carrier received from another process (see :meth:`TelemetryHook.span`).

    Returns:
        A context manager yielding the span (current inside the block).

    """
    return LAYER.span(name, attributes or {}, kind=kind, parent=parent)


def carrier() -> dict[str, str]:
    """The current span's W3C Trace Context (``traceparent``, ``tracestate``); ``{}`` when off."""
    return LAYER.carrier()


def fail(span: Span, error_type: str, message: str = "") -> None:
    """Mark ``span`` failed with ``error.type = error_type`` (nothing when telemetry is off)."""
    if span is not NO_SPAN:
        LAYER.fail(span, error_type, message)


def flush(timeout: float = 2.0) -> None:
    """Export buffered spans (at most ``timeout`` seconds) before a process ends abruptly.

    A worker that leaves by ``os._exit`` calls it first; nothing happens with telemetry off.
    """
    LAYER.flush(timeout)


def model_turn(
    model: str,
    *,
    provider: str | None = None,
    operation: str = "chat",
    attributes: Mapping[str, str | int] | None = None,
) -> AbstractContextManager[Span]:
    """The span of one model turn of a recorded agent session (GenAI semconv 1.37.0).

    A ``CLIENT`` span ``{operation} {model}`` with ``gen_ai.operation.name``,
    ``gen_ai.request.model`` and ``gen_ai.provider.name``; the recorder adds what the
    response tells (``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
    ``gen_ai.usage.output_tokens``, ``toolproof.turn_digest``) with ``set_attribute``
    and a failure with :func:`fail`. :data:`NO_SPAN` with telemetry off.

    Args:
        model: the model asked (``gen_ai.request.model``), e.g. ``gpt-4o-mini``.
        provider: ``gen_ai.provider.name`` (``openai``, ``anthropic``...), if known.
        operation: ``gen_ai.operation.name``: ``chat``, ``text_completion``,
            ``generate_content``.
        attributes: more first attributes (``toolproof.run_id``...).

    Returns:
        A context manager yielding the span, current inside the block.

    """
    first: dict[str, str | int] = {
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": model,
    }
    if provider is not None:
        first["gen_ai.provider.name"] = provider
    first.update(attributes or {})
    return span(f"{operation} {model}", first, kind="client")
