"""Where an MCP server's log messages and questions go: the channel of the call that caused them.

A server sends log messages and asks its client (``sampling/createMessage``,
``elicitation/create``, ``roots/list``) while one of its tools runs. On 2026-07-28 a question rides
the ``tools/call`` result (an ``InputRequiredResult``) and the SDK's ``Client`` asks it
in the calling task, so :func:`~toolproof.tools.context.current_channel` is exact; on
2025-11-25 it comes on its own, and goes to the one call of this server in flight
(several at once: ambiguous, refused). :class:`Callers` keeps the calls in flight and
hands the SDK its callbacks: a sampling or elicitation callback only when the Toolset
has someone to ask (:class:`~toolproof.tools.asking.Askers`), so only then is the
capability announced.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from toolproof.errors import ToolCallError
from toolproof.sources.mcp.common import wire
from toolproof.sources.mcp.tasks import McpTasks
from toolproof.tools.asking import Askers, AskingChannel
from toolproof.tools.context import CallChannel, current_channel

__all__ = ["INTERNAL_ERROR", "INVALID_REQUEST", "Callers"]

logger = logging.getLogger("toolproof.mcp")

_mcp_types: Any = importlib.import_module("mcp.types")
INVALID_REQUEST = -32600
"""JSON-RPC: the request cannot be served (a relayed request with no single caller)."""
INTERNAL_ERROR = -32603
"""JSON-RPC: the relayed request failed on the caller's side."""


class Callers:
    """The calls of one server in flight, and the SDK callbacks that reach their channels.

    Args:
        name: the server's config name (for messages).
        askers: who can answer sampling and elicitation.

    """

    def __init__(self, name: str, askers: Askers) -> None:
        self.name = name
        self.askers = askers
        self._inflight: list[CallChannel] = []

    def callbacks(self) -> dict[str, Any]:
        """The ``mcp.Client`` keyword arguments: logging always, asking only when answered.

        Always the tasks extension too (:mod:`toolproof.sources.mcp.tasks`): a server's
        task is polled to its result, its questions asked through these callbacks.
        """
        callbacks: dict[str, Any] = {"logging_callback": self.on_log, "extensions": [McpTasks()]}
        if self.askers.can_sample:
            callbacks["sampling_callback"] = self.on_sampling
        if self.askers.can_elicit:
            callbacks["elicitation_callback"] = self.on_elicitation
        if self.askers.relay:  # roots: only a served client has them (no Python callback)
            callbacks["list_roots_callback"] = self.on_list_roots
        return callbacks

    @contextlib.contextmanager
    def calling(self) -> Iterator[None]:
        """Count the running call (its channel, when it has one) in flight meanwhile."""
        channel = current_channel()
        if channel is not None:
            self._inflight.append(channel)
        try:
            yield
        finally:
            if channel is not None:
                self._inflight.remove(channel)

    def caller(self) -> CallChannel | None:
        """The channel of the call that caused what arrives now, or ``None``."""
        channel = current_channel()
        if channel is not None:
            return channel
        return self._inflight[0] if len(self._inflight) == 1 else None

    async def on_log(self, params: Any) -> None:
        """A ``notifications/message``: to the caller's channel, else the debug log."""
        level = getattr(params, "level", "info")
        data = getattr(params, "data", None)
        channel = self.caller()
        if channel is not None:
            await channel.log(str(level), data, getattr(params, "logger", None))
            return
        logger.debug("MCP server %r log [%s]: %s", self.name, level, data)

    async def relay(self, method: str, params: Any, result_type: Any, context: Any = None) -> Any:
        """Ask the caller's channel; its answer as ``result_type``, or an ``ErrorData``.

        With no caller's channel (a call made from Python, or several calls of a
        2025-11-25 server in flight), the Toolset's callbacks answer, unrecorded.
        """
        channel = self.caller()
        if channel is None and self.askers.answers:
            channel = AskingChannel(self.askers)
        if channel is None:
            why = (
                "no call of this server is in flight"
                if not self._inflight
                else (f"{len(self._inflight)} calls of this server are in flight (ambiguous)")
            )
            return _mcp_types.ErrorData(code=INVALID_REQUEST, message=f"{method}: {why}")
        # over 2026-07-28 the SDK gives the question's key in the server's InputRequiredResult
        # as the context's request_id: the relayed question keeps it (a 2025-11-25 id is an int)
        key = getattr(context, "request_id", None)
        key = key if isinstance(key, str) else None
        try:
            if method == "roots/list":
                return result_type.model_validate(await channel.list_roots(key))
            ask = channel.sample if method == "sampling/createMessage" else channel.elicit
            return result_type.model_validate(await ask(wire(params), key))
        except ToolCallError as exc:
            return _mcp_types.ErrorData(code=INTERNAL_ERROR, message=exc.failure.message)
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]
            where = "/".join(str(part) for part in problem["loc"])
            message = f"{method}: the answer is malformed: {where}: {problem['msg']}"
            return _mcp_types.ErrorData(code=INTERNAL_ERROR, message=message)

    async def on_sampling(self, context: Any, params: Any) -> Any:
        """The SDK's sampling callback."""
        result_type = _mcp_types.CreateMessageResult
        return await self.relay("sampling/createMessage", params, result_type, context)

    async def on_elicitation(self, context: Any, params: Any) -> Any:
        """The SDK's elicitation callback."""
        return await self.relay("elicitation/create", params, _mcp_types.ElicitResult, context)

    async def on_list_roots(self, context: Any) -> Any:
        """The SDK's roots callback (announced only under ``toolproof serve``'s relay)."""
        return await self.relay("roots/list", None, _mcp_types.ListRootsResult, context)
