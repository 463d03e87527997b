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

The runtime also tells the call's layers who is calling: the call's id in the run,
the session's approver (read by an ``approve`` layer), the call channel of a served
request (read by a body's :class:`~toolproof.tools.context.Context` and an imported MCP
server's relay) and the call's idempotency key (:mod:`toolproof.tools.idempotency`),
all in one :class:`CallScope` (:func:`current_call`).

The layers between the runtime and a body are user code that calls its inner tool
with ``inner.call(arguments)``; a failure must reach the runtime even when such a
layer hides it, so the call's scope (its identity and its notes) travels out of band,
in one context variable that lives only while :func:`observe` awaits the call (an
``asyncio`` task started inside the call shares it). It never changes what a call
returns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from toolproof.contract.tools import ToolFailure, ToolResult

__all__ = [
    "CallChannel",
    "CallScope",
    "Observed",
    "current_call",
    "note_approval",
    "note_failure",
    "note_policy",
    "note_recovery",
    "observe",
]


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
        idempotency_key: the call's idempotency key
            (:mod:`toolproof.tools.idempotency`), or ``None`` when it had none; the
            recorder writes it in the call's ``tool_called`` event.
        origin: who asked for the call, as the ``tool_called`` fields the recorder adds:
            ``model_call_id`` (the id the agent's model gave the call) and, when a
            recorded model turn asked for it, ``model_turn`` (its step); ``None``: not
            said (a session's framework adapters say it; frozen, read back from the trace).
        policy: the ``policy_decided`` fields the runtime's policy gate reported
            (:func:`note_policy`; ``{"type": "policy_decided", ...}``), or ``None``.

    """

    result: ToolResult
    failures: tuple[tuple[ToolFailure, str], ...] = ()
    approvals: tuple[dict[str, Any], ...] = ()
    relayed: tuple[dict[str, Any], ...] = ()
    idempotency_key: str | None = None
    origin: dict[str, str] | None = None
    policy: dict[str, Any] | None = None


class CallChannel(Protocol):
    """Where a call's log, progress and questions go (one per served request).

    Requests and results are MCP wire form (camelCase JSON): ``sample`` takes
    ``CreateMessageRequestParams`` and returns a ``CreateMessageResult``; ``elicit``
    takes ``ElicitRequestParams`` and returns an ``ElicitResult``; ``list_roots`` returns a
    ``ListRootsResult``. ``key`` names the question in a 2026-07-28 ``InputRequiredResult``
    (``inputRequests``; ``None``: the channel picks one); other channels ignore it. Each raises
    :class:`~toolproof.errors.ToolCallError` when the client cannot answer.
    """

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Send one log message (``level`` one of :data:`~toolproof.tools.context.LOG_LEVELS`)."""
        ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report progress (a no-op when the caller asked for none)."""
        ...

    async def sample(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """Ask the caller's model (``sampling/createMessage``)."""
        ...

    async def elicit(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """Ask the caller's user (``elicitation/create``)."""
        ...

    async def list_roots(self, key: str | None = None) -> dict[str, Any]:
        """Ask the caller's roots (``roots/list``); a ``ListRootsResult``."""
        ...

    def client_capabilities(self) -> dict[str, Any] | None:
        """The capabilities the caller's client declared (``ClientCapabilities``, wire form).

        ``None`` when the channel has no client of its own (Python callbacks): an imported
        server then sees what toolproof's own client announces. A 2026-07-28 request to an
        imported server carries these instead
        (:meth:`~toolproof.sources.mcp.callers.Callers.forward`).
        """
        ...

    def note_missing(self, capabilities: dict[str, Any]) -> None:
        """An imported server refused the call (``-32021``): the caller's client lacks these.

        ``capabilities``: its ``requiredCapabilities`` (``ClientCapabilities``, wire form).
        A channel whose client can be told so (a 2026-07-28 served request) answers the
        served call ``-32021`` too when it fails; the others ignore it.
        """
        ...


class CallScope(NamedTuple):
    """Who is making the call :func:`observe` is awaiting, as its layers see it.

    Attributes:
        call_id: the call's id in the run (``call_<hex>``), or ``None``.
        approver: the session's approver callback (``async (ApprovalRequest) -> bool |
            Decision``, overriding the Toolset's), or ``None``.
        channel: where the call's log, progress and questions go (the served MCP
            request's), or ``None`` outside a served call.
        idempotency_key: the call's idempotency key (the same for every attempt a
            ``retry`` layer makes; :mod:`toolproof.tools.idempotency`), or ``None``.

    """

    call_id: str | None = None
    approver: Callable[..., Awaitable[Any]] | None = None
    channel: CallChannel | None = None
    idempotency_key: str | None = None


class _Call:
    """The scope and the notes of the call :func:`observe` is awaiting (notes mutable)."""

    __slots__ = ("approvals", "failures", "policy", "recovered", "scope")

    def __init__(self, scope: CallScope) -> None:
        self.scope = scope
        self.failures: list[ToolFailure] = []
        self.recovered: list[tuple[ToolFailure, str]] = []
        self.approvals: list[dict[str, Any]] = []
        self.policy: dict[str, Any] | None = None

    def observed(self, result: ToolResult, relayed: Sequence[dict[str, Any]]) -> Observed:
        failures: list[tuple[ToolFailure, str]] = []
        for failure in self.failures:
            by = next((layer for seen, layer in self.recovered if seen == failure), "")
            if failure != result.failure and (failure, by) not in failures:
                failures.append((failure, by))
        return Observed(
            result,
            tuple(failures),
            tuple(self.approvals),
            tuple(relayed),
            self.scope.idempotency_key,
            policy=self.policy,
        )


_CALL: ContextVar[_Call | None] = ContextVar("toolproof_call", default=None)


def current_call() -> CallScope | None:
    """The scope of the call being observed (its id and approver), or ``None`` outside one."""
    call = _CALL.get()
    return None if call is None else call.scope


async def observe(
    call: Awaitable[ToolResult],
    relayed: Sequence[dict[str, Any]] = (),
    *,
    call_id: str | None = None,
    approver: Callable[..., Awaitable[Any]] | None = None,
    channel: CallChannel | None = None,
    idempotency_key: str | None = None,
) -> Observed:
    """Await ``call`` and return its result with everything its layers noted meanwhile.

    Args:
        call: the call to make (``tool.call(arguments)``, or a coroutine around it that
            returns the result to record).
        relayed: the list the serving face's call channel fills with the requests the
            call relays to its caller; read once the call has returned.
        call_id: the call's id in the run, for its ``approve`` layers
            (:func:`current_call`); ``None``: the enclosing observed call's, if any.
        approver: the session's approver for its ``approve`` layers; ``None``: the
            enclosing observed call's, if any (else the Toolset's own).
        channel: the call channel of the served request the call answers; ``None``:
            the enclosing observed call's, if any.
        idempotency_key: the call's idempotency key, read by its body
            (:func:`toolproof.tools.idempotency.current_idempotency_key`); ``None``:
            the enclosing observed call's, if any.

    Returns:
        The :class:`Observed` call; its ``failures`` leave out the one the result
        carries, its ``idempotency_key`` is the call's.

    Raises:
        Whatever awaiting ``call`` raises (``asyncio.CancelledError`` included); the
        notes are then dropped.

    """
    outer = _CALL.get()
    if outer is not None:  # a call made inside an observed call keeps who is calling
        call_id = call_id if call_id is not None else outer.scope.call_id
        approver = approver if approver is not None else outer.scope.approver
        channel = channel if channel is not None else outer.scope.channel
        if idempotency_key is None:
            idempotency_key = outer.scope.idempotency_key
    notes = _Call(CallScope(call_id, approver, channel, idempotency_key))
    token = _CALL.set(notes)
    try:
        result = await call
    finally:
        _CALL.reset(token)
    return notes.observed(result, relayed)


def note_failure(failure: ToolFailure) -> None:
    """Record ``failure`` for the runtime observing the current call (if any)."""
    notes = _CALL.get()
    if notes is not None:
        notes.failures.append(failure)


def note_recovery(failure: ToolFailure, layer: str) -> None:
    """Declare that ``layer`` handles ``failure`` (retries the call) instead of passing it on."""
    notes = _CALL.get()
    if notes is not None:
        notes.recovered.append((failure, layer))


def note_approval(event: dict[str, Any]) -> None:
    """Report an approval event: ``approval_requested``, ``_decided`` or ``_skipped`` fields.

    ``event`` holds ``type`` and the event's fields except ``idx``, ``prev``, ``step``
    and ``call_id`` (the recorder fills those from the call's block).
    """
    notes = _CALL.get()
    if notes is not None:
        notes.approvals.append(event)


def note_policy(event: dict[str, Any]) -> None:
    """Report the call's ``policy_decided`` fields (``type`` included, without ``call_id``).

    Only the first report of an observed call is kept: the runtime's gate decides once.
    """
    notes = _CALL.get()
    if notes is not None and notes.policy is None:
        notes.policy = event
