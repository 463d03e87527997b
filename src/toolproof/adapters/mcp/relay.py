"""The call channel of one served MCP request: log, progress, sampling and elicitation.

``toolproof serve`` makes every ``tools/call`` with a :class:`RequestChannel` bound to
that request as its call's channel (:func:`toolproof.tools.observe.observe`), so whatever the
call produces on the way (a Python body's :class:`~toolproof.tools.context.Context`,
an imported server's notifications and requests) reaches **the client session that
made the call**, on the request's own stream:

* log messages are ``notifications/message`` related to the request, sent when their
  level is at least the session's ``logging/setLevel`` level (default: all);
* progress is ``notifications/progress`` against the request's ``progressToken``
  (nothing when the client sent none);
* sampling, elicitation and roots are ``sampling/createMessage``,
  ``elicitation/create`` and ``roots/list`` requests to that client; a JSON-RPC error
  answer becomes a failure of kind ``tool_error`` naming the method, and a client that
  declared no such capability gets none (failure kind ``unavailable``).
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import mcp_types as types
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from toolproof.contract.tools import ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureKindName, FailureWhere
from toolproof.tools.asking import relayed_entry
from toolproof.tools.context import LOG_LEVELS

__all__ = ["ClientNotices", "LogLevels", "RequestChannel"]


def _connection(session: Any) -> Any:
    # the SDK hands each request its own ServerSession over one connection object
    return getattr(session, "_connection", session)


class LogLevels:
    """The ``logging/setLevel`` level of each client connection (weakly keyed)."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    def set(self, session: Any, level: str) -> None:
        """Remember ``level`` (one of :data:`~toolproof.tools.context.LOG_LEVELS`)."""
        self._levels[_connection(session)] = LOG_LEVELS.index(level)

    def allows(self, session: Any, level: str) -> bool:
        """Whether a message at ``level`` goes to the connection of ``session``."""
        rank = LOG_LEVELS.index(level) if level in LOG_LEVELS else len(LOG_LEVELS)
        return rank >= self._levels.get(_connection(session), 0)


class ClientNotices:
    """Relays the Toolset's source notifications to the right client connections.

    ``notifications/resources/updated`` goes to each connection that subscribed to the
    URI (``resources/subscribe``, until ``resources/unsubscribe``); a ``list_changed``
    of tools, resources or prompts goes to each connection that has listed something
    (``tools/list``, ``resources/list``, ``resources/templates/list``,
    ``prompts/list``) or subscribed. Connections are held weakly: a closed one is
    forgotten. Sent on the connection's own stream, best effort (the SDK drops a
    notification a closed stream cannot carry).

    A 2026-07-28 client has no such stream: it opens ``subscriptions/listen`` (the SDK's
    :class:`~mcp.server.subscriptions.ListenHandler` on ``bus``), and each notification
    is also published to ``bus`` as its event, which the handler delivers to the
    streams whose filter asks for it.
    """

    def __init__(self, bus: SubscriptionBus | None = None) -> None:
        self._bus = bus
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self._subscribed: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def seen(self, session: Any) -> None:
        """Note that the connection of ``session`` (a request's ServerSession) listed."""
        self._seen.add(_connection(session))

    def subscribe(self, session: Any, uri: str, on: bool) -> None:
        """Note a ``resources/subscribe`` (``on``) or ``resources/unsubscribe`` of ``uri``."""
        connection = _connection(session)
        self._seen.add(connection)
        uris = self._subscribed.setdefault(connection, set())
        if on:
            uris.add(uri)
        else:
            uris.discard(uri)

    async def relay(self, method: str, params: dict[str, Any]) -> None:
        """Send ``method`` with ``params`` to the connections it concerns (see the class)."""
        if self._bus is not None:
            event: ServerEvent | None = None
            if method == "notifications/resources/updated":
                event = ResourceUpdated(str(params.get("uri", "")))
            elif method in _EVENTS:
                event = _EVENTS[method]()
            if event is not None:
                await self._bus.publish(event)
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            targets = [c for c, uris in list(self._subscribed.items()) if uri in uris]
        else:
            targets = list(self._seen)
        for connection in targets:
            await connection.notify(method, params or None)


_EVENTS: dict[str, type[ToolsListChanged | PromptsListChanged | ResourcesListChanged]] = {
    "notifications/tools/list_changed": ToolsListChanged,
    "notifications/prompts/list_changed": PromptsListChanged,
    "notifications/resources/list_changed": ResourcesListChanged,
}


def _failure(kind: FailureKindName, message: str) -> ToolCallError:
    failure = ToolFailure(kind=FailureKind(kind), message=message, where=FailureWhere.BODY)
    return ToolCallError(failure)


class RequestChannel:
    """The :class:`~toolproof.tools.context.CallChannel` of one request (see the module).

    Args:
        ctx: the SDK's request context of the ``tools/call``.
        levels: the sessions' log levels.
        relayed: where each request sent to the client is noted, as ``{"method",
            "request", "answer", "error"}`` (wire form; a recorded session writes them
            as ``request_relayed`` events), or ``None``.

    """

    def __init__(
        self, ctx: Any, levels: LogLevels, relayed: list[dict[str, Any]] | None = None
    ) -> None:
        self._ctx = ctx
        self._levels = levels
        self._relayed = relayed

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Send ``notifications/message`` on the request's stream (level permitting)."""
        session = self._ctx.session
        if not self._levels.allows(session, level):
            return
        with warnings.catch_warnings():  # deprecated by protocol 2026-07-28 (SEP-2577)
            warnings.simplefilter("ignore")
            await session.send_log_message(
                level, data, logger=logger, related_request_id=self._ctx.request_id
            )

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Send ``notifications/progress`` against the caller's token (none: nothing)."""
        await self._ctx.session.report_progress(progress, total, message)

    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared for this request (wire form; ``{}``: nothing).

        Its ``initialize`` capabilities on 2025-11-25; on 2026-07-28 the request's own
        (``_meta``), read from the SDK's ``ServerSession.client_capabilities``.
        """
        declared = self._ctx.session.client_capabilities
        if declared is None:
            return {}
        wire: dict[str, Any] = declared.model_dump(by_alias=True, mode="json", exclude_none=True)
        return wire

    def note_missing(self, capabilities: dict[str, Any]) -> None:
        """Ignored: a 2025-11-25 client has no ``-32021``; the call's failure says it."""

    def _capable(self, capability: types.ClientCapabilities, method: str) -> None:
        if not self._ctx.session.check_client_capability(capability):
            raise _failure(
                "unavailable", f"the client did not declare the capability {method} needs"
            )

    async def _ask(
        self, method: str, request: Any, result_type: Any, key: str | None
    ) -> dict[str, Any]:
        metadata = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        params = request.params  # roots/list: none
        asked = (
            {}
            if params is None
            else params.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = await self._ctx.session.send_request(
                    request, result_type, metadata=metadata
                )
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]["msg"]
            failed = _failure("tool_error", f"the client's {method} answer is malformed: {problem}")
            self._note(method, asked, None, failed)
            raise failed from exc
        except MCPError as exc:
            failed = _failure("tool_error", f"the client refused {method}: {exc}")
            self._note(method, asked, None, failed)
            raise failed from exc
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        self._note(method, asked, dumped, None)
        return dumped

    def _note(
        self,
        method: str,
        request: dict[str, Any],
        answer: dict[str, Any] | None,
        failed: ToolCallError | None,
    ) -> None:
        if self._relayed is not None:
            self._relayed.append(relayed_entry(method, request, answer, failed))

    async def sample(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """Send ``sampling/createMessage`` to the client; its ``CreateMessageResult``.

        ``key``: the question's key in an input-required round (a request has none).
        """
        self._capable(types.ClientCapabilities(sampling=types.SamplingCapability()), "sampling")
        params = types.CreateMessageRequestParams.model_validate(request)
        message = types.CreateMessageRequest(params=params)
        return await self._ask("sampling/createMessage", message, types.CreateMessageResult, key)

    async def elicit(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """Send ``elicitation/create`` to the client; its ``ElicitResult`` (``key``: see sample)."""
        capability = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        self._capable(capability, "elicitation")
        params = types.ElicitRequestFormParams.model_validate(request)
        message = types.ElicitRequest(params=params)
        return await self._ask("elicitation/create", message, types.ElicitResult, key)

    async def list_roots(self, key: str | None = None) -> dict[str, Any]:
        """Send ``roots/list`` to the client; its ``ListRootsResult`` (``key``: as ``sample``)."""
        self._capable(types.ClientCapabilities(roots=types.RootsCapability()), "roots/list")
        request = types.ListRootsRequest()
        return await self._ask("roots/list", request, types.ListRootsResult, key)
