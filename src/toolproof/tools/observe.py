"""What one call's layers reported, handed back with the call's result as :class:`Observed`.

A tool call passes through layers (extension wrappers, backends, nested tools); an
outer layer may recover from an inner failure (a retry) or, misbehaving, turn it
into plausible text. :class:`~toolproof.tools.tool.Tool` notes each failure it
returns with :func:`note_failure`; a layer that legitimately recovers (the ``retry``
wrapper, before it runs the call again) says so with :func:`note_recovery`; an
``approve`` layer reports its events with :func:`note_approval`. A runtime makes one
call with :func:`observe`, which returns the result and what the layers reported as
one frozen :class:`Observed`; the recorder writes it into the call's block
(``failure_observed`` with ``recovered_by``, for the ``failure-honesty`` check).
Outside :func:`observe` noting does nothing.

The layers between the runtime and a body are user code that calls its inner tool
with ``inner.call(arguments)``; a failure must reach the runtime even when such a
layer hides it, so the notes are collected out of band, in a context variable that
lives only while :func:`observe` awaits the call (an ``asyncio`` task started inside
the call shares it). It only observes: it never changes what a call returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from toolproof.contract.tools import ToolFailure, ToolResult

__all__ = ["Observed", "note_approval", "note_failure", "note_recovery", "observe"]


@dataclass(frozen=True, slots=True)
class Observed:
    """One finished call: its result and what its layers reported while it ran.

    Attributes:
        result: what the call returned.
        failures: ``(failure, recovered_by)`` for every failure a layer reported other
            than the one :attr:`result` carries, without repeats, in the order reported;
            ``recovered_by`` names the layer that declared it recovered from the failure
            (``retry`` running the call again), or is ``""``.
        approvals: the approval events an ``approve`` layer reported, in order, as
            ``{"type": ..., fields}`` without ``idx``/``prev``/``step``/``call_id``
            (the recorder writes them in the call's block before ``tool_called``).
        relayed: each request the call sent its caller (sampling, elicitation), in
            order, as ``{"method", "request", "answer", "error"}`` (wire-form JSON;
            ``answer`` ``None`` and ``error`` ``"<kind>: <message>"`` when it failed),
            filled by the serving face's call channel.

    """

    result: ToolResult
    failures: tuple[tuple[ToolFailure, str], ...] = ()
    approvals: tuple[dict[str, Any], ...] = ()
    relayed: tuple[dict[str, Any], ...] = ()


class _Notes:
    """The notes of the call :func:`observe` is awaiting (mutable while it runs)."""

    __slots__ = ("approvals", "failures", "recovered")

    def __init__(self) -> None:
        self.failures: list[ToolFailure] = []
        self.recovered: list[tuple[ToolFailure, str]] = []
        self.approvals: list[dict[str, Any]] = []

    def observed(self, result: ToolResult, relayed: Sequence[dict[str, Any]]) -> Observed:
        failures: list[tuple[ToolFailure, str]] = []
        for failure in self.failures:
            by = next((layer for seen, layer in self.recovered if seen == failure), "")
            if failure != result.failure and (failure, by) not in failures:
                failures.append((failure, by))
        return Observed(result, tuple(failures), tuple(self.approvals), tuple(relayed))


_NOTES: ContextVar[_Notes | None] = ContextVar("toolproof_failures_seen", default=None)


async def observe(call: Awaitable[ToolResult], relayed: Sequence[dict[str, Any]] = ()) -> Observed:
    """Await ``call`` and return its result with everything its layers noted meanwhile.

    Args:
        call: the call to make (``tool.call(arguments)``, or a coroutine around it that
            returns the result to record).
        relayed: the list the serving face's call channel fills with the requests the
            call relays to its caller; read once the call has returned.

    Returns:
        The :class:`Observed` call; its ``failures`` leave out the one the result carries.

    Raises:
        Whatever awaiting ``call`` raises (``asyncio.CancelledError`` included); the
        notes are then dropped.

    """
    notes = _Notes()
    token = _NOTES.set(notes)
    try:
        result = await call
    finally:
        _NOTES.reset(token)
    return notes.observed(result, relayed)


def note_failure(failure: ToolFailure) -> None:
    """Record ``failure`` for the runtime observing the current call (if any)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.failures.append(failure)


def note_recovery(failure: ToolFailure, layer: str) -> None:
    """Declare that ``layer`` handles ``failure`` (retries the call) instead of passing it on."""
    notes = _NOTES.get()
    if notes is not None:
        notes.recovered.append((failure, layer))


def note_approval(event: dict[str, Any]) -> None:
    """Report an approval event: ``approval_requested``, ``_decided`` or ``_skipped`` fields.

    ``event`` holds ``type`` and the event's fields except ``idx``, ``prev``, ``step``
    and ``call_id`` (the recorder fills those from the call's block).
    """
    notes = _NOTES.get()
    if notes is not None:
        notes.approvals.append(event)
