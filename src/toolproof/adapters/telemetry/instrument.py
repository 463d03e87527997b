"""``toolproof.instrument``: OpenTelemetry spans and metrics for tools and runs.

The optional outward face of DESIGN section 2 (the ``otel`` extra).
This module imports no OpenTelemetry: :func:`instrument` loads
:mod:`toolproof.adapters.telemetry.spans` (which does) when it is called, and installs its
hook in :mod:`toolproof.tools.hooks`. Spans follow the OpenTelemetry GenAI semantic
conventions 1.37.0 (``execute_tool {gen_ai.tool.name}``); see docs/telemetry.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from toolproof.config import CONFIG, TelemetrySection
from toolproof.errors import UsageError
from toolproof.tools import hooks
from toolproof.tools.toolset import Toolset
from toolproof.version import install_hint

__all__ = ["instrument", "instrument_from_config", "instrumented_builder", "uninstrument"]


def instrument(
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool = False,
    *,
    redact: Sequence[str] = (),
) -> None:
    """Emit OpenTelemetry spans and metrics for every tool call, run and step.

    Args:
        tracer_provider: an ``opentelemetry.trace.TracerProvider``; ``None``: the global one.
        meter_provider: an ``opentelemetry.metrics.MeterProvider``; ``None``: the global one.
        capture_content: record arguments and results as span attributes
            (``toolproof.arguments``, ``toolproof.result``, canonical JSON). Off by
            default: spans then carry only the ``sha256:`` digests.
        redact: JSON Pointers into the arguments replaced by ``{"redacted": kind,
            "digest": ...}`` before they are captured — the ``audit`` wrapper's policy
            (:func:`toolproof.extensions.wrappers.audit.redact`).

    Raises:
        UsageError: ``toolproof[otel]`` is not installed (the message says how to add
            it), or a ``redact`` entry is not a JSON Pointer (RFC 6901).

    """
    try:
        from toolproof.adapters.telemetry.spans import OtelHook
    except ImportError as exc:  # the extra is optional: imported only here
        raise UsageError(
            f"toolproof.instrument needs OpenTelemetry ({exc.name or exc} is not installed); "
            f"install it with: {install_hint('otel')}"
        ) from exc
    hooks.install(OtelHook(tracer_provider, meter_provider, capture_content, tuple(redact)))


def uninstrument() -> None:
    """Turn telemetry off again: the call path goes back to skipping the hook."""
    hooks.install(None)


def instrument_from_config(section: TelemetrySection) -> Callable[[], None]:
    """Apply a ``toolproof.toml`` ``[telemetry]`` section; return the flush-and-stop call.

    With ``enabled = true`` and no SDK tracer provider installed globally, one is
    installed that batches spans to OTLP/HTTP: the exporter reads the standard
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables
    (default ``http://localhost:4318/v1/traces``) and ``OTEL_SERVICE_NAME``.

    Args:
        section: the parsed ``[telemetry]`` section.

    Returns:
        A callable that flushes the spans and turns telemetry off (a no-op when
        ``enabled`` is false).

    Raises:
        UsageError: ``enabled`` but ``toolproof[otel]`` is not installed.

    """
    if not section.enabled:
        return lambda: None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:  # the extra is optional: imported only here
        raise UsageError(
            f"[telemetry] enabled = true needs OpenTelemetry ({exc.name or exc} is not "
            f"installed); install it with: {install_hint('otel')}"
        ) from exc
    provider: Any = trace.get_tracer_provider()
    owned = not isinstance(provider, TracerProvider)
    if owned:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    instrument(provider, None, section.capture_content, redact=section.redact)

    def stop() -> None:
        uninstrument()
        if owned:
            provider.shutdown()  # flushes the batch
        else:
            provider.force_flush()

    return stop


def instrumented_builder(
    build: Callable[[Path], Awaitable[Toolset]],
) -> Callable[[Path], Awaitable[Toolset]]:
    """A worker's Toolset builder that also applies the file's ``[telemetry]`` section.

    The worker's spans (``toolproof.backend.run {variant}`` and the tool spans inside)
    then continue the caller's trace; closing the Toolset flushes them, and a worker
    ending abruptly flushes first (:func:`toolproof.tools.hooks.flush`).

    Args:
        build: the plain builder (:func:`toolproof.config.build_toolset`).

    Returns:
        ``async (config path) -> Toolset``, raising what ``build`` and
        :func:`instrument_from_config` raise.

    """

    async def build_instrumented(path: Path) -> Toolset:
        toolset = await build(path)
        stop = instrument_from_config(toolset.resources[CONFIG].telemetry)

        async def flush() -> None:
            stop()

        toolset.on_close(flush)
        return toolset

    return build_instrumented
