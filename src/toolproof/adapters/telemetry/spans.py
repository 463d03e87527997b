"""The OpenTelemetry hook :func:`toolproof.instrument` installs (imports ``opentelemetry``).

One ``execute_tool {name}`` span per :class:`~toolproof.tools.tool.Tool` run (GenAI
semantic conventions 1.37.0, ``gen_ai.*`` attributes); a variant's layers call their
inner tools, so each layer is a child span of the one outside it (retry attempts are
sibling children of the retry layer). The outermost span of a recorded call carries
``toolproof.call_id`` (the ``ToolCall`` content id); every span carries the
``sha256:`` digests of its arguments and result (canonical JSON,
:mod:`toolproof.identity`).

Content rule: a span carries a value (arguments, a result, a failure's or an exception's
message) only when content capture is on. With it off (the default) a span carries
kinds, names and digests only: a failed span's status description is its ``error.type``
(a failure kind, an exception's class name, an HTTP or JSON-RPC code), and an exception
leaving a span is recorded as ``error.type`` and that status, never as an ``exception``
event (whose message and stack trace hold values).

Metrics: ``toolproof.tool.duration`` (histogram, s) and ``toolproof.tool.failures``
(counter, by ``error.type``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import ValidationError

from toolproof.contract.tools import ToolResult
from toolproof.errors import CanonicalizationError, UsageError
from toolproof.extensions.wrappers.audit import AuditConfig, redact
from toolproof.identity import canonical_json, digest_json
from toolproof.tools import hooks
from toolproof.tools.observe import current_call

__all__ = ["SCOPE", "OtelHook"]

SCOPE = "toolproof"
"""The instrumentation scope name of every span and instrument."""

_IN_TOOL: ContextVar[bool] = ContextVar("toolproof_in_tool_span", default=False)

_W3C = TraceContextTextMapPropagator()
"""``traceparent``/``tracestate`` (W3C Trace Context), whatever the global propagator is."""

_KINDS = {
    "internal": trace.SpanKind.INTERNAL,
    "client": trace.SpanKind.CLIENT,
    "server": trace.SpanKind.SERVER,
    "producer": trace.SpanKind.PRODUCER,
    "consumer": trace.SpanKind.CONSUMER,
}


def _digest_or_empty(value: Any) -> str:
    try:
        return digest_json(value)
    except CanonicalizationError:
        return ""


def _failed(span: Any) -> bool:
    """Whether ``span`` (an SDK span) was already marked failed by :meth:`OtelHook.fail`."""
    status = getattr(span, "status", None)
    return getattr(status, "status_code", None) is StatusCode.ERROR


def _json_text(value: Any) -> str:
    try:
        return canonical_json(value).decode("utf-8")
    except CanonicalizationError as exc:
        return f"<not JSON: {exc.rule}>"


class OtelHook:
    """The :class:`~toolproof.tools.hooks.TelemetryHook` backed by OpenTelemetry.

    Args:
        tracer_provider: a ``TracerProvider``, or ``None`` for the global one.
        meter_provider: a ``MeterProvider``, or ``None`` for the global one.
        capture_content: record arguments/results as attributes (redacted).
        redact: JSON Pointers redacted from captured arguments (the ``audit`` policy).

    Raises:
        UsageError: a ``redact`` entry is not a JSON Pointer.

    """

    def __init__(
        self,
        tracer_provider: Any,
        meter_provider: Any,
        capture_content: bool,
        redact: tuple[str, ...],
    ) -> None:
        try:
            AuditConfig(path="-", redact=redact)  # the audit wrapper's pointer rule
        except ValidationError as exc:
            rule = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
            raise UsageError(f"instrument(redact=...): {rule}") from exc
        self.provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "toolproof.tool.duration", unit="s", description="Duration of one tool run."
        )
        self.failures = meter.create_counter(
            "toolproof.tool.failures", unit="{failure}", description="Tool runs that failed."
        )
        self.capture_content = capture_content
        self.redact = redact

    def _attributes(self, tool: Any, arguments: Any, outermost: bool) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.spec.name,
            "gen_ai.tool.type": "extension" if tool.stack else "function",
            "toolproof.arguments_digest": _digest_or_empty(arguments),
        }
        if tool.spec.description:
            attributes["gen_ai.tool.description"] = tool.spec.description
        if tool.stack:
            attributes["toolproof.layer"] = tool.stack[-1].name
            attributes["toolproof.base"] = tool.base or ""
        if outermost:
            scope = current_call()
            call_id = scope.call_id if scope is not None else None
            if call_id is not None:
                attributes["toolproof.call_id"] = call_id
            attributes["gen_ai.tool.call.id"] = call_id or "call_" + secrets.token_hex(12)
        if self.capture_content:
            shown = redact(arguments, self.redact) if type(arguments) is dict else arguments
            attributes["toolproof.arguments"] = _json_text(shown)
        return attributes

    def _finish(self, span: Any, tool: Any, result: ToolResult, seconds: float) -> None:
        labels = {"gen_ai.tool.name": tool.spec.name}
        failure = result.failure
        if failure is None:
            span.set_attribute("toolproof.result_digest", _digest_or_empty(result.value))
            if self.capture_content:
                span.set_attribute("toolproof.result", _json_text(result.value))
        else:
            labels["error.type"] = failure.kind
            self.fail(span, failure.kind, failure.message)
            self.failures.add(1, labels)
        self.duration.record(seconds, labels)

    async def tool_call(
        self,
        tool: Any,
        arguments: dict[str, Any],
        run: Callable[[Any, dict[str, Any]], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Run ``run(tool, arguments)`` inside an ``execute_tool`` span; return its result."""
        outermost = not _IN_TOOL.get()
        attributes = self._attributes(tool, arguments, outermost)
        token = _IN_TOOL.set(True)
        try:
            with self.tracer.start_as_current_span(
                f"execute_tool {tool.spec.name}",
                kind=trace.SpanKind.INTERNAL,
                attributes=attributes,
                record_exception=False,
            ) as span:
                started = time.perf_counter()
                result = await run(tool, arguments)
                self._finish(span, tool, result, time.perf_counter() - started)
                return result
        finally:
            _IN_TOOL.reset(token)

    def refused(self, tool: Any, arguments: Any, result: ToolResult) -> ToolResult:
        """Record a call refused before its body ran as a span of its own; return ``result``."""
        attributes = self._attributes(tool, arguments, not _IN_TOOL.get())
        with self.tracer.start_as_current_span(
            f"execute_tool {tool.spec.name}", attributes=attributes
        ) as span:
            self._finish(span, tool, result, 0.0)
        return result

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, str | int],
        *,
        kind: hooks.SpanKind = "internal",
        parent: Mapping[str, str] | None = None,
    ) -> Iterator[hooks.Span]:
        """A span ``name`` current around the block (a run, a step, an MCP request...).

        With a ``parent`` carrier holding a valid ``traceparent`` the span continues
        that trace and links the span that was current here, if any (the MCP
        conventions' rule for a server span); otherwise the current span is the parent.

        An exception leaving the block marks the span failed (:meth:`fail` with the
        exception's class name, and ``"<class>: <message>"`` as the SDK words it) and
        propagates unchanged; with content
        capture on the SDK's ``exception`` event (message, stack trace) is added too.
        """
        context = None
        links: list[Link] = []
        if parent:
            extracted = _W3C.extract(dict(parent))
            remote = trace.get_current_span(extracted).get_span_context()
            if remote.is_valid:
                context = extracted
                ambient = trace.get_current_span().get_span_context()
                if ambient.is_valid:
                    links.append(Link(ambient))
        with self.tracer.start_as_current_span(
            name,
            context=context,
            kind=_KINDS[kind],
            attributes=dict(attributes),
            links=links,
            record_exception=self.capture_content,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                if span.is_recording() and not _failed(span):
                    self.fail(span, type(exc).__qualname__, f"{type(exc).__name__}: {exc}")
                raise

    def carrier(self) -> dict[str, str]:
        """The current span's ``traceparent`` (and ``tracestate``), ``{}`` without a valid span."""
        out: dict[str, str] = {}
        _W3C.inject(out)
        return out

    def fail(self, span: Any, error_type: str, message: str) -> None:
        """Set ``error.type`` and status ``ERROR`` on ``span``.

        The status description is ``message`` (``None`` when empty) with content capture
        on, and ``error_type`` with it off: a message may hold argument and result
        values or exception text (the content rule of this module).
        """
        span.set_attribute("error.type", error_type)
        description = (message or None) if self.capture_content else str(error_type)
        span.set_status(Status(StatusCode.ERROR, description))

    def flush(self, timeout: float) -> None:
        """Flush the tracer provider (an SDK provider; others have nothing to flush)."""
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush(int(timeout * 1000))
