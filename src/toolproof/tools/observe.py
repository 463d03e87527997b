"""Every failure a tool layer reports during one call, seen by the runtime that made it.

A tool call passes through layers (extension wrappers, backends, nested tools); an
outer layer may recover from an inner failure (a retry) or, misbehaving, turn it
into plausible text. :class:`~toolproof.tools.tool.Tool` notes each failure it
returns with :func:`note_failure`; a layer that legitimately recovers (the ``retry``
wrapper, before it runs the call again) says so with :func:`note_recovery`. A
runtime wraps one call in :func:`observe_failures` and records what it saw in the
trace (``failure_observed``, with ``recovered_by``) for the ``failure-honesty``
check. Outside :func:`observe_failures` noting does nothing.

The recorder lives in a context variable: it only observes, it never changes what
a call returns, and an ``asyncio`` task started inside the call shares it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.tools import ToolFailure

__all__ = ["Observation", "note_approval", "note_failure", "note_recovery", "observe_failures"]


@dataclass
class Observation:
    """What one call's layers reported.

    Attributes:
        failures: every failure returned by a layer, in order (repeats included).
        recovered: ``(failure, layer)`` for each failure a layer declared it recovered
            from (``retry`` running the call again).
        relayed: each request the call sent its caller (sampling, elicitation), in
            order, as ``{"method", "request", "answer", "error"}`` (wire-form JSON;
            ``answer`` ``None`` and ``error`` ``"<kind>: <message>"`` when it failed),
            filled by the serving face's call channel.

    """

    failures: list[ToolFailure] = field(default_factory=list)
    recovered: list[tuple[ToolFailure, str]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    """Approval events an ``approve`` layer reported (``{"type": ..., fields}``), in order;
    the recorder writes them in the call's block before ``tool_called``."""
    relayed: list[dict[str, Any]] = field(default_factory=list)

    def __iter__(self) -> Iterator[ToolFailure]:
        """The failures, in order (so ``list(observation)`` is :attr:`failures`)."""
        return iter(self.failures)

    def __len__(self) -> int:
        return len(self.failures)

    def recovered_by(self, failure: ToolFailure) -> str:
        """The layer that declared it recovered from ``failure``, or ``""``."""
        return next((layer for seen, layer in self.recovered if seen == failure), "")


_SEEN: ContextVar[Observation | None] = ContextVar("toolproof_failures_seen", default=None)


def note_failure(failure: ToolFailure) -> None:
    """Record ``failure`` for the runtime observing the current call (if any)."""
    seen = _SEEN.get()
    if seen is not None:
        seen.failures.append(failure)


def note_recovery(failure: ToolFailure, layer: str) -> None:
    """Declare that ``layer`` handles ``failure`` (retries the call) instead of passing it on."""
    seen = _SEEN.get()
    if seen is not None:
        seen.recovered.append((failure, layer))


def note_approval(event: dict[str, Any]) -> None:
    """Report an approval event: ``approval_requested``, ``_decided`` or ``_skipped`` fields.

    ``event`` holds ``type`` and the event's fields except ``idx``, ``prev``, ``step``
    and ``call_id`` (the recorder fills those from the call's block).
    """
    seen = _SEEN.get()
    if seen is not None:
        seen.approvals.append(event)


class _Observing:
    """The context manager :func:`observe_failures` returns (a class: no generator frame)."""

    __slots__ = ("_token", "seen")

    def __init__(self) -> None:
        self.seen = Observation()

    def __enter__(self) -> Observation:
        self._token = _SEEN.set(self.seen)
        return self.seen

    def __exit__(self, *exc_info: object) -> None:
        _SEEN.reset(self._token)


def observe_failures() -> AbstractContextManager[Observation]:
    """Collect every failure noted while the block runs (used as a ``with`` statement).

    Returns:
        A context manager whose ``__enter__`` gives the :class:`Observation` filled
        while the block runs (read it after the block); not reentrant.

    """
    return _Observing()
