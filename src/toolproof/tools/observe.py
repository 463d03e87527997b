"""Every failure a tool layer reports during one call, seen by the runtime that made it.

A tool call passes through layers (extension wrappers, backends, nested tools); an
outer layer may recover from an inner failure (a retry) or, misbehaving, turn it
into plausible text. :class:`Tool` notes each failure it returns with
:func:`note_failure`; a runtime wraps one call in :func:`observe_failures` and gets
the list, which it records in the trace (``failure_observed``) for the
``failure-honesty`` check. Outside :func:`observe_failures` noting does nothing.

The recorder lives in a context variable: it only observes, it never changes what
a call returns, and an ``asyncio`` task started inside the call shares the list.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from toolproof.contract.tools import ToolFailure

__all__ = ["note_failure", "observe_failures"]

_SEEN: ContextVar[list[ToolFailure] | None] = ContextVar("toolproof_failures_seen", default=None)


def note_failure(failure: ToolFailure) -> None:
    """Record ``failure`` for the runtime observing the current call (if any)."""
    seen = _SEEN.get()
    if seen is not None:
        seen.append(failure)


@contextmanager
def observe_failures() -> Iterator[list[ToolFailure]]:
    """Collect every failure noted while the block runs, in order.

    Yields:
        The list the failures are appended to (read it after the block).

    """
    seen: list[ToolFailure] = []
    token = _SEEN.set(seen)
    try:
        yield seen
    finally:
        _SEEN.reset(token)
