"""The telemetry hook: one module-level slot the call path checks, set by ``instrument``.

:func:`toolproof.instrument` (the OpenTelemetry adapter, ``toolproof[otel]``) installs
a :class:`TelemetryHook` here with :func:`install`; until then :data:`ACTIVE` is
``None`` and a tool call pays one global lookup and one ``is None`` test. The floors
below ``adapters`` (``tools``, ``runs``) report through this slot and never import
OpenTelemetry or the adapter.

:func:`claimed` marks the tool call a run or a session is recording (the ``ToolCall``
content id), so the outermost tool span can carry it (``toolproof.call_id``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from toolproof.contract.tools import ToolResult

__all__ = [
    "ACTIVE",
    "Span",
    "TelemetryHook",
    "claimed",
    "current_call_id",
    "install",
    "take_call_id",
]


class Span(Protocol):
    """The part of a span the lower floors use: set one attribute."""

    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        """Set attribute ``key`` to ``value`` (OpenTelemetry attribute types)."""


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

    def span(self, name: str, attributes: Mapping[str, str | int]) -> AbstractContextManager[Span]:
        """A span named ``name`` around a block (a run, a step), current inside it."""


ACTIVE: TelemetryHook | None = None
"""The installed hook, or ``None`` (telemetry off: the call path skips it)."""

_CALL_ID: ContextVar[str | None] = ContextVar("toolproof_call_id", default=None)


def install(hook: TelemetryHook | None) -> TelemetryHook | None:
    """Install ``hook`` (``None`` turns telemetry off); return the hook it replaces."""
    global ACTIVE
    previous, ACTIVE = ACTIVE, hook
    return previous


@contextmanager
def claimed(call_id: str) -> Iterator[None]:
    """Mark ``call_id`` (a ``ToolCall`` content id) as the call the block makes."""
    token = _CALL_ID.set(call_id)
    try:
        yield
    finally:
        _CALL_ID.reset(token)


def current_call_id() -> str | None:
    """The call id claimed for the current call, or ``None``."""
    return _CALL_ID.get()


def take_call_id() -> str | None:
    """Return the claimed call id and clear it, so nested layer calls do not claim it."""
    call_id = _CALL_ID.get()
    if call_id is not None:
        _CALL_ID.set(None)
    return call_id
