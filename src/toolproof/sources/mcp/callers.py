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

Over 2026-07-28 there is no connection to announce capabilities on: each request carries
its client's in ``params._meta`` (``io.modelcontextprotocol/clientCapabilities``), and
a server asks only what they allow. The SDK's ``Client`` stamps the capabilities it
announced on every request, with no per-request override; :meth:`Callers.forward`,
applied to each message the client writes (the transport's write stream), puts there
instead those of the client that made the call (``toolproof serve`` proxying this
server): the imported server then asks a client without elicitation no elicitation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
from collections.abc import Iterator
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import ValidationError

from toolproof.errors import ToolCallError
from toolproof.sources.mcp.common import McpCallError, wire
from toolproof.sources.mcp.tasks import McpTasks
from toolproof.tools.asking import Askers, AskingChannel
from toolproof.tools.context import CallChannel, current_channel

__all__ = ["ASKED", "INTERNAL_ERROR", "INVALID_REQUEST", "Callers", "forwarded_capabilities"]

logger = logging.getLogger("toolproof.mcp")

_mcp_types: Any = importlib.import_module("mcp.types")
INVALID_REQUEST = -32600
"""JSON-RPC: the request cannot be served (a relayed request with no single caller)."""
INTERNAL_ERROR = -32603
"""JSON-RPC: the relayed request failed on the caller's side."""


ASKED = ("sampling", "elicitation", "roots")
"""The client capabilities that let a server ask its client something."""


def forwarded_capabilities(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """The capabilities a request made for a caller's client declares to the imported server.

    Args:
        ours: what toolproof's client announces (``ClientCapabilities``, wire form).
        theirs: what the caller's client declared (same form).

    Returns:
        ``ours`` with each of :data:`ASKED` kept only when both declare it, as the
        caller's client declared it (its sub-capabilities: ``sampling.tools``,
        ``elicitation.url``...); the rest of ``ours`` (``extensions``...: toolproof's
        client handles them itself) as it is.

    """
    forwarded = {key: value for key, value in ours.items() if key not in ASKED}
    forwarded.update({key: theirs[key] for key in ASKED if key in ours and key in theirs})
    return forwarded


def _required_capabilities(exc: McpCallError) -> dict[str, Any] | None:
    """The ``requiredCapabilities`` of a ``-32021`` answer (the SDK error it was raised from)."""
    if exc.code != MISSING_REQUIRED_CLIENT_CAPABILITY:
        return None
    data = getattr(exc.__cause__, "data", None)
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    return required if isinstance(required, dict) else None


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
        """Count the running call (its channel, when it has one) in flight meanwhile.

        A call the server refuses with ``-32021`` (missing required client capability:
        the caller's client, whose capabilities :meth:`forward` declared, lacks one)
        tells the channel which (:meth:`refusals`).
        """
        channel = current_channel()
        if channel is not None:
            self._inflight.append(channel)
        try:
            with self.refusals():
                yield
        finally:
            if channel is not None:
                self._inflight.remove(channel)

    @contextlib.contextmanager
    def refusals(self) -> Iterator[None]:
        """Tell the running call's channel when the request in it is refused with ``-32021``.

        Around any request made for a caller (``tools/call`` through :meth:`calling`;
        ``prompts/get``, ``resources/read``... through
        :meth:`~toolproof.sources.mcp.connection.McpConnection.request`): an
        :class:`~toolproof.sources.mcp.common.McpCallError` whose JSON-RPC error is
        ``-32021`` with ``data.requiredCapabilities`` hands those to the channel's
        :meth:`~toolproof.tools.observe.CallChannel.note_missing` and is re-raised as it
        is; no channel, or any other error: re-raised untouched.
        """
        try:
            yield
        except McpCallError as exc:
            required = _required_capabilities(exc)
            channel = current_channel()
            if channel is not None and required is not None:
                channel.note_missing(required)
            raise

    def forward(self, message: Any) -> Any:
        """``message`` (a ``SessionMessage`` the client writes), with its caller's capabilities.

        A 2026-07-28 request (its ``_meta`` carries ``io.modelcontextprotocol/clientCapabilities``)
        sent while a call whose channel has a client of its own runs
        (:meth:`~toolproof.tools.observe.CallChannel.client_capabilities`) carries
        :func:`forwarded_capabilities` of both; any other message is returned as it is.
        The message is copied, never changed in place.
        """
        channel = current_channel()
        theirs = channel.client_capabilities() if channel is not None else None
        payload: Any = getattr(message, "message", None)
        params = getattr(payload, "params", None)
        if theirs is None or not isinstance(params, dict):
            return message
        meta = params.get("_meta")
        ours = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(ours, dict):
            return message
        stamped = {**meta, CLIENT_CAPABILITIES_META_KEY: forwarded_capabilities(ours, theirs)}
        request = payload.model_copy(update={"params": {**params, "_meta": stamped}})
        return dataclasses.replace(message, message=request)

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
