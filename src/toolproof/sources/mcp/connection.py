"""One live MCP client session, owned by a background task (the MCP tool source's engine).

:class:`McpConnection` starts a server (stdio subprocess or streamable-HTTP URL)
through the official ``mcp`` SDK's public client (:class:`mcp.Client`, ``mode="auto"``),
which negotiates the protocol revision itself: ``server/discover`` at 2026-07-28,
falling back to the ``initialize`` handshake (2025-11-25 and older) for a server that
does not speak it. It lists every tool (following ``nextCursor``) and keeps the
session open until :meth:`McpConnection.aclose`. The SDK's transports and session are
anyio task groups that must be entered and left by the same task, so one private task
owns them and any task may call :meth:`McpConnection.call_tool`.

The client announces ``sampling`` and ``elicitation`` only when the Toolset has
someone to ask (:class:`~toolproof.tools.asking.Askers`); such a request, a
server-initiated one (2025-11-25) or one inside an ``InputRequiredResult``
(2026-07-28, resolved by the SDK's client), goes to the channel of the call that
caused it.

Everything crossing the SDK boundary is converted to the MCP wire form (camelCase
JSON, ``model_dump(by_alias=True, mode="json", exclude_none=True)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import IO, Any

import anyio
from mcp.client import Client, InputRequiredRoundsExceededError
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolproof.redaction import redact_url
from toolproof.sources.mcp.callers import Callers
from toolproof.sources.mcp.catalog import Freshness, list_catalog, list_tools
from toolproof.sources.mcp.common import (
    CONNECTION_CLOSED,
    SDK_ERRORS,
    McpCallError,
    McpServer,
    McpStartError,
    error_code,
    handshake,
    http_client,
    notification_method,
    skip_result_check,
    stderr_tail,
    unstamped,
    wire,
)
from toolproof.sources.mcp.listen import Listening
from toolproof.sources.mcp.oauth import OAuthSetupError, oauth_provider
from toolproof.sources.mcp.stdio import (
    EXIT_WAIT_SECONDS,
    JunkReport,
    exit_description,
    read_status,
    stdio_parameters,
)
from toolproof.sources.mcp.trace import Outbox, SessionFacts, traced
from toolproof.tools.asking import Askers
from toolproof.tools.catalog import NOTICES
from toolproof.tools.context import current_channel
from toolproof.tools.idempotency import IDEMPOTENCY_META_KEY, current_idempotency_key

__all__ = ["McpConnection"]

logger = logging.getLogger("toolproof.mcp")

_CLOSE_GRACE = 8.0
"""Seconds :meth:`McpConnection.aclose` waits for the SDK's own shutdown before cancelling it."""


class McpConnection:
    """A client session with one MCP server, alive from :meth:`start` to :meth:`aclose`.

    Args:
        server: where the server is and its timeouts.
        on_list_changed: called (no arguments) for each ``notifications/tools/list_changed``.
        on_notice: awaited with ``(method, params)`` (wire form) for each notification of
            :data:`~toolproof.tools.catalog.NOTICES` (resource updates and list changes).
        askers: who answers the server's sampling and elicitation requests; the client
            announces each capability only when there is one (default: nobody).

    """

    def __init__(
        self,
        server: McpServer,
        on_list_changed: Callable[[], None],
        on_notice: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
        askers: Askers | None = None,
    ) -> None:
        self.server = server
        self._on_list_changed = on_list_changed
        self._on_notice = on_notice
        self.callers = Callers(server.name, askers or Askers())
        self._client: Client | None = None
        self._session: Any = None  # the client's ClientSession, once listed
        self._stderr: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope = anyio.CancelScope()  # entered by the owner task; cancelled to abort
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self.initialize: dict[str, Any] = {}
        self.tools: list[dict[str, Any]] = []
        self.listings: dict[str, list[dict[str, Any]]] = {}  # resources, templates, prompts
        self.skipped: list[str] = []  # optional list methods the server lacks (-32601)
        self._phase = "initialize"  # the MCP method start() is waiting for
        self._status: str | None = None  # the stdio server's exit-status file
        self._junk = JunkReport(server.name)  # its stdout lines that are not JSON-RPC
        self.facts = SessionFacts(server)  # what its client spans share
        self._timed_out = False  # start() gave up after startup_timeout
        self._secret = ""  # the OAuth client secret, kept out of every message
        self.listening = Listening(server.name)  # 2026-07-28: the change streams
        self.freshness = Freshness()  # 2026-07-28: the ttlMs of its last tools/list

    async def start(self) -> None:
        """Launch the server, handshake and list its tools (into :attr:`tools`, wire form).

        Raises:
            McpStartError: it could not be launched, exited, broke the protocol or did not
                answer within ``startup_timeout`` seconds; carries the stderr tail.

        """
        if self.server.command is not None:
            self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in aclose()
            handle, self._status = tempfile.mkstemp(prefix="toolproof-mcp-", suffix=".exit")
            os.close(handle)
            os.unlink(self._status)  # the watcher creates it when the server ends
        self._task = asyncio.create_task(self._run(), name=f"toolproof-mcp-{self.server.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready.wait()), self.server.startup_timeout)
        except TimeoutError:  # the owner task is cancelled: start() reports the phase
            self._timed_out = True
            self._scope.cancel()
            await self._ready.wait()
        if self._session is None:
            await self._stop_task()
            reason = self._start_reason()
            ended = await self.exit_status()
            if ended is not None and "closed the connection" in reason:
                reason += f" (the server process {ended})"
            tail = stderr_tail(self._stderr) if self.server.command is not None else None
            await self.aclose()
            raise McpStartError(self._clean(reason), tail)

    def _clean(self, text: str) -> str:
        """``text`` with the OAuth client secret (if any) masked."""
        return text.replace(self._secret, "***") if self._secret else text

    def _start_reason(self) -> str:
        exc = self._failure
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        waited = (
            "initialize and tools/list"
            if self._phase in ("initialize", "tools/list")
            else f"initialize, tools/list and {self._phase}"
        )
        if isinstance(exc, OAuthSetupError):
            return str(exc)
        if self._timed_out or isinstance(exc, TimeoutError):
            limit = self.server.startup_timeout
            return f"did not answer {waited} within {limit:g} s (startup_timeout)"
        ended = read_status(self._status)
        if isinstance(ended, OSError):  # the watcher could not start the server
            return f"cannot launch {self.server.command!r}: {ended.strerror or ended}"
        if isinstance(exc, FileNotFoundError | PermissionError):
            return f"cannot launch {self.server.command!r}: {exc.strerror or exc}"
        if isinstance(exc, SDK_ERRORS) and error_code(exc) == CONNECTION_CLOSED:
            return f"the server closed the connection before answering {waited}"
        if isinstance(exc, SDK_ERRORS):
            return f"answered {self._phase} with error {error_code(exc)}: {exc}"
        if self.server.url is not None:
            shown = redact_url(self.server.url)
            return f"cannot connect to {shown}: {type(exc).__name__}: {exc}"
        return f"failed to start: {type(exc).__name__}: {exc}"

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK transport of the server (a ``mcp.client.Transport``): its two streams."""
        server = self.server
        async with AsyncExitStack() as stack:
            if server.command is not None:
                assert self._status is not None
                params = stdio_parameters(server, self._status)
                streams: Any = await stack.enter_async_context(
                    stdio_client(params, errlog=self._stderr)  # type: ignore[arg-type]
                )
            else:  # streamable HTTP: the headers (and OAuth) live on the HTTP client
                assert server.url is not None
                auth = None
                if server.auth is not None:
                    auth, self._secret = oauth_provider(server.auth, server.url)
                http = await stack.enter_async_context(http_client(server.headers, auth))
                http.event_hooks["response"].append(self.facts.on_response)
                streams = await stack.enter_async_context(
                    streamable_http_client(server.url, http_client=http)
                )
            yield streams[0], Outbox(streams[1], self.callers.forward)

    def _client_for(self) -> Client:
        """The SDK client, with a callback (so a capability) only where someone answers."""
        return Client(
            self._transport(),
            mode="legacy" if self.server.protocol == "2025-11-25" else "auto",
            cache=None,  # every listing reaches the server (the lock checks what it lists)
            log_level="debug",  # 2026-07-28 sends log messages only to requests that opt in
            message_handler=self._on_message,
            **self.callers.callbacks(),
        )

    async def _run(self) -> None:
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(self._client_for())
                    session = client.session
                    skip_result_check(session)
                    self.initialize = handshake(client)
                    self.facts.protocol_version = client.protocol_version
                    self._phase = "subscriptions/listen"
                    stack.push_async_callback(self.listening.aclose)
                    capabilities = self.initialize.get("capabilities") or {}
                    await self.listening.list_changes(client, capabilities)
                    self._phase = "tools/list"
                    self.tools = await list_tools(session, self.freshness)
                    self.listings, self.skipped = await list_catalog(
                        session, self.initialize, self._enter
                    )
                    self._client = client
                    self._session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # recorded; start() and call_tool() report it
            self._failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            self._client = None
            self._ready.set()

    def _enter(self, method: str) -> None:
        self._phase = method

    @property
    def closing(self) -> bool:
        """Whether :meth:`aclose` has begun (a request failing now is the shutdown's doing)."""
        return self._stop.is_set()

    async def relist(self) -> list[dict[str, Any]]:
        """List the server's tools again (wire form): a ``list_changed``, or its ``ttlMs`` ran out.

        Raises:
            McpCallError: the server is not connected, did not answer within
                ``call_timeout`` seconds, answered a JSON-RPC error or the connection
                broke; the message names ``tools/list``.

        """
        session = self._session
        name = self.server.name
        if session is None:
            raise McpCallError(
                "transport", f"MCP server {name!r} is not connected; tools/list not sent"
            )
        async with self._answering("tools/list"):
            tools = await list_tools(session, self.freshness)
        return tools

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._junk.note(message)
            return
        method = notification_method(message)
        if method == "notifications/tools/list_changed":
            self._on_list_changed()
        if method in NOTICES and self._on_notice is not None:
            params = getattr(getattr(message, "root", message), "params", None)
            await self._on_notice(method, unstamped(wire(params)) if params is not None else {})

    async def exit_status(self) -> str | None:
        """How the stdio server process ended (``exited with status 7``...), or ``None``.

        Waits up to a second for a process that is dying to be collected; ``None`` for a
        server still running, a streamable-HTTP server, or one never spawned.
        """
        if self._status is None:
            return None
        deadline = time.monotonic() + EXIT_WAIT_SECONDS
        ended = read_status(self._status)
        while ended is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            ended = read_status(self._status)
        if isinstance(ended, str):  # stopped by the watcher: a message over the limit
            return ended
        return exit_description(ended) if isinstance(ended, int) else None

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool`` with ``arguments`` (sent as they are); return the result in wire form.

        Raises:
            McpCallError: no result within ``call_timeout`` seconds, the connection is
                gone, or the server answered a JSON-RPC error.

        """
        session = self._session
        name = self.server.name
        if session is None:
            why = f" ({type(self._failure).__name__}: {self._failure})" if self._failure else ""
            ended = await self.exit_status()
            how = f"; the server process {ended}" if ended else ""
            raise McpCallError(
                "transport", f"MCP server {name!r} is not connected{why}{how}; tools/call not sent"
            )
        with self.callers.calling():
            return await traced(
                self.facts, "tools/call", tool, lambda meta: self._send_call(tool, arguments, meta)
            )

    async def _send_call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, str]
    ) -> dict[str, Any]:
        """One ``tools/call`` with ``meta`` as ``params._meta``; its result, wire form.

        The running call's idempotency key, when it has one, joins ``meta`` as
        ``io.toolproof/idempotency-key`` (:mod:`toolproof.tools.idempotency`).

        Raises:
            McpCallError: see :meth:`call_tool`.

        """
        client = self._client
        name = self.server.name
        if client is None:
            raise McpCallError(
                "transport", f"MCP server {name!r} is not connected; tools/call not sent"
            )
        channel = current_channel()
        progress = channel.progress if channel else None
        key = current_idempotency_key()
        if key is not None:  # the call's key, for a server that acts once per key
            meta = {**meta, IDEMPOTENCY_META_KEY: key}
        extra: dict[str, Any] = {"meta": meta} if meta else {}
        try:
            async with self._answering("tools/call"):
                result = await client.call_tool(
                    tool, arguments, progress_callback=progress, **extra
                )
        except InputRequiredRoundsExceededError as exc:  # 2026-07-28: it kept asking
            raise McpCallError(
                "protocol", f"MCP server {name!r} kept asking during tools/call: {exc}"
            ) from exc
        except RuntimeError as exc:  # the SDK's own outputSchema check
            raise McpCallError(
                "invalid_result", f"MCP client refused the tools/call result: {exc}"
            ) from exc
        except ValueError as exc:  # pydantic: a result that is not a CallToolResult
            raise McpCallError(
                "protocol", f"MCP server {name!r} sent a malformed tools/call result: {exc}"
            ) from exc
        return unstamped(wire(result))

    async def request(self, method: str, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
        """Send one request (``send(client)``) within ``call_timeout``; its result, wire form.

        ``client`` is the SDK's :class:`mcp.Client`, which answers a 2026-07-28
        ``InputRequiredResult`` of ``resources/read`` or ``prompts/get`` as it does for
        ``tools/call``.

        Raises:
            McpCallError: as :meth:`call_tool`: not connected, timeout, a JSON-RPC error
                (``-32021``: see ``Callers.refusals``), a broken connection; names ``method``.

        """
        client = self._client
        name = self.server.name
        if client is None:
            raise McpCallError(
                "transport", f"MCP server {name!r} is not connected; {method} not sent"
            )

        async def once(meta: dict[str, str]) -> dict[str, Any]:
            async with self._answering(method):
                answer = await send(client)
            return unstamped(wire(answer))

        with self.callers.refusals():  # a -32021 reaches the caller's client as one
            return await traced(self.facts, method, None, once)

    async def subscribe(self, uri: str, on: bool) -> None:
        """Follow (``on``) or stop following the updates of resource ``uri``.

        ``resources/subscribe`` / ``resources/unsubscribe`` on a 2025-11-25 server; a
        ``subscriptions/listen`` stream of that URI on a 2026-07-28 one (the revision
        removed the two methods). Either way its ``notifications/resources/updated``
        reach ``on_notice``.

        Raises:
            McpCallError: as :meth:`request`; the message names the MCP method.

        """
        client = self._client
        if client is None or not self.listening.modern(client):
            method = "resources/subscribe" if on else "resources/unsubscribe"

            async def send(client: Any) -> Any:
                with warnings.catch_warnings():  # deprecated by 2026-07-28 (listen)
                    warnings.simplefilter("ignore")
                    if on:
                        return await client.subscribe_resource(uri)
                    return await client.unsubscribe_resource(uri)

            await self.request(method, send)
            return

        async def listen(meta: dict[str, str]) -> dict[str, Any]:
            async with self._answering("subscriptions/listen"):
                await self.listening.watch(client, uri, on)
            return {}

        await traced(self.facts, "subscriptions/listen", None, listen)

    @contextlib.asynccontextmanager
    async def _answering(self, method: str) -> AsyncIterator[None]:
        """Wait at most ``call_timeout`` for ``method``'s answer; map the SDK's errors, once.

        The one mapping of every request this client sends (``tools/list``,
        ``tools/call``, ``resources/read``, ``prompts/get``, ...) to an
        :class:`McpCallError`: ``timeout`` past ``call_timeout`` seconds; ``transport``
        when the connection closed (JSON-RPC ``-32000``, with how the server process
        ended) or broke (a closed stream, an ``OSError``); ``protocol`` for any other
        JSON-RPC error, with its code.
        """
        name = self.server.name
        timeout = self.server.call_timeout
        try:
            with anyio.fail_after(timeout):
                yield
        except TimeoutError:
            raise McpCallError(
                "timeout", f"MCP server {name!r} did not answer {method} within {timeout:g} s"
            ) from None
        except SDK_ERRORS as exc:
            code = error_code(exc)
            if code == CONNECTION_CLOSED:
                ended = await self.exit_status()
                how = f"; the server process {ended}" if ended else ""
                refused = self.server.auth.refusals if self.server.auth else []
                how += f"; {refused[-1]}" if refused else ""
                raise McpCallError(
                    "transport",
                    f"MCP server {name!r} closed the connection during {method}: {exc}{how}",
                    code,
                ) from exc
            raise McpCallError(
                "protocol", f"MCP server {name!r} answered {method} with error {code}: {exc}", code
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            raise McpCallError(
                "transport",
                f"MCP server {name!r} connection broke during {method}: "
                f"{type(exc).__name__}: {exc}",
            ) from exc

    def stderr(self) -> str:
        """The tail of the server's stderr so far (stdio servers; ``""`` otherwise)."""
        return stderr_tail(self._stderr)

    async def _stop_task(self) -> None:
        task = self._task
        if task is not None and not task.done():
            self._stop.set()
            if self._session is None:  # still starting: abort the handshake now
                self._scope.cancel()
            done, _ = await asyncio.wait({task}, timeout=_CLOSE_GRACE)
            if not done:
                self._scope.cancel()
                await asyncio.wait({task})

    async def aclose(self) -> None:
        """End the session and stop the server (stdin closed, then SIGTERM/SIGKILL); idempotent."""
        await self._stop_task()
        self._junk.flush()
        if self._stderr is not None:
            self._stderr.close()
        if self._status is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._status)
