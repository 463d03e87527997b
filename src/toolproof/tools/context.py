"""The call context: what a tool body can ask of whoever called it (log, progress, ask).

A Python tool asks for it by type, ``def f(x: int, ctx: toolproof.Context)``: that
parameter is never part of the input schema and no caller can send it; the body gets
a :class:`Context` for the running call. Its methods go to the **call channel** of
the call, set by the face that received it: ``toolproof serve`` sets one per MCP
request (log messages, progress notifications against the caller's progress token,
``sampling/createMessage``, ``elicitation/create`` and ``roots/list`` sent to that
client), and an imported MCP tool relays its server's progress, log messages,
sampling, elicitation and roots requests to the same channel. Without a channel (an
in-process call, a run, a body in a ``process`` or ``celery`` worker), log messages go
to the ``toolproof.tool`` logger, progress is dropped, and sampling, elicitation and
roots fail with kind ``unavailable``.

The channel is part of the call's scope, which the face gives when it makes the call
(:func:`toolproof.tools.observe.observe` with ``channel=``); it is information about
the call, not control flow, and it reaches sync bodies too (``asyncio.to_thread``
copies the context the scope lives in).
"""

from __future__ import annotations

import logging
from typing import Any

from toolproof.contract.tools import ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureWhere
from toolproof.tools.observe import CallChannel, current_call

__all__ = ["LOG_LEVELS", "CallChannel", "Context", "current_channel"]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP log levels (RFC 5424 severities), least severe first."""

logger = logging.getLogger("toolproof.tool")
_PY_LEVELS = {"debug": 10, "info": 20, "notice": 20, "warning": 30, "error": 40}


def current_channel() -> CallChannel | None:
    """The channel of the running call, or ``None`` outside a served call."""
    scope = current_call()
    return None if scope is None else scope.channel


def _unavailable(what: str) -> ToolCallError:
    return ToolCallError(
        ToolFailure(
            kind=FailureKind.UNAVAILABLE,
            message=f"{what} needs a client to ask: this call was not made through "
            "toolproof serve (or runs in a worker process)",
            where=FailureWhere.BODY,
        )
    )


class Context:
    """What a tool body asks for by type to log, report progress and ask the caller.

    Every method is async and reads the running call's channel when it is called;
    :attr:`idempotency_key` reads the running call's key.
    """

    @property
    def idempotency_key(self) -> str | None:
        """The running call's idempotency key (``idem_<64 hex>``), or ``None``.

        Recording sessions (``record_session``, ``serve --record``) give every call one,
        the same for each attempt a ``retry`` layer makes and, for the same session id
        and occurrence, across processes: the formula is in
        :mod:`toolproof.tools.idempotency` (docs/durability.md). A body with a side
        effect passes it on (an ``Idempotency-Key`` HTTP header) so it acts once per
        key. ``None`` outside a recording session; a body relocated to a ``process`` or
        ``celery`` worker reads the caller's (the request carries it).
        """
        scope = current_call()
        return None if scope is None else scope.idempotency_key

    async def log(self, data: Any, level: str = "info", logger_name: str | None = None) -> None:
        """Send a log message to the caller (MCP ``notifications/message``).

        Args:
            data: the message: a string or any JSON value.
            level: one of :data:`LOG_LEVELS`.
            logger_name: the MCP ``logger`` field, or ``None``.

        Raises:
            ValueError: ``level`` is not an MCP log level.

        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
        channel = current_channel()
        if channel is None:
            logger.log(_PY_LEVELS.get(level, 50), "%s", data)
            return
        await channel.log(level, data, logger_name)

    async def info(self, data: Any) -> None:
        """``log(data, "info")``."""
        await self.log(data, "info")

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress to the caller (``notifications/progress``, when it asked for it).

        Args:
            progress: how far the work is (increasing from call to call).
            total: the amount ``progress`` counts up to, or ``None`` when unknown.
            message: a human-readable note, or ``None``.

        """
        channel = current_channel()
        if channel is not None:
            await channel.progress(progress, total, message)

    async def sample(
        self,
        prompt: str,
        *,
        max_tokens: int = 100,
        system_prompt: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Ask the caller's model (MCP ``sampling/createMessage``) one user message.

        Args:
            prompt: the user message's text.
            max_tokens: the most tokens the answer may take.
            system_prompt: a system prompt, or ``None``.
            key: the question's key in a 2026-07-28 client's ``InputRequiredResult``
                (``inputRequests``), unique among the call's pending questions; ``None``:
                ``q1``, ``q2``... in asking order. Ignored where questions are requests.

        Returns:
            The ``CreateMessageResult`` in wire form (``role``, ``content``, ``model``...).

        Raises:
            ToolCallError: kind ``unavailable`` outside a served call; the client's
                refusal or error otherwise.

        """
        request: dict[str, Any] = {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        }
        if system_prompt is not None:
            request["systemPrompt"] = system_prompt
        channel = current_channel()
        if channel is None:
            raise _unavailable("sampling")
        return await channel.sample(request, key)

    async def elicit(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the caller's user to fill in a form (MCP ``elicitation/create``, form mode).

        Args:
            message: what to show the user.
            schema: the requested schema (a flat object of primitive properties).
            key: the question's key in a 2026-07-28 client's ``InputRequiredResult``
                (``inputRequests``), unique among the call's pending questions; ``None``:
                ``q1``, ``q2``... in asking order. Ignored where questions are requests.

        Returns:
            The ``ElicitResult`` in wire form: ``action`` (``accept``, ``decline`` or
            ``cancel``) and, when accepted, ``content``.

        Raises:
            ToolCallError: kind ``unavailable`` outside a served call; the client's
                refusal or error otherwise.

        """
        channel = current_channel()
        if channel is None:
            raise _unavailable("elicitation")
        return await channel.elicit({"message": message, "requestedSchema": schema}, key)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """Ask the caller for its roots (MCP ``roots/list``): the folders it lets tools see.

        Args:
            key: the question's key in a 2026-07-28 client's ``InputRequiredResult``
                (``inputRequests``), unique among the call's pending questions; ``None``:
                ``q1``, ``q2``... in asking order. Ignored where questions are requests.

        Returns:
            The roots in wire form, each ``{"uri": "file:///...", "name": ...}`` (``name``
            optional); ``[]`` when the client has none.

        Raises:
            ToolCallError: kind ``unavailable`` outside a served call or when the client
                declared no ``roots`` capability; the client's refusal or error otherwise.

        """
        channel = current_channel()
        if channel is None:
            raise _unavailable("roots/list")
        answer = await channel.list_roots(key)
        return list(answer.get("roots", []))
