"""One live MCP client session, owned by a background task (the MCP tool source's engine).

:class:`McpConnection` starts a server (stdio subprocess or streamable-HTTP URL)
through the official ``mcp`` SDK client, performs the ``initialize`` handshake,
lists every tool (following ``nextCursor``), and keeps the session open until
:meth:`McpConnection.aclose`. The SDK's transports and session are anyio task
groups that must be entered and left by the same task, so one private task owns
them and any task may call :meth:`McpConnection.call_tool`.

Everything crossing the SDK boundary is converted to the MCP wire form (camelCase
JSON, ``model_dump(by_alias=True, mode="json", exclude_none=True)``), which is the
same for the ``mcp`` 1.x and 2.x clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import IO, Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from toolproof.errors import ToolCallError
from toolproof.redaction import redact_url
from toolproof.sources.mcp.catalog import list_catalog, list_tools
from toolproof.sources.mcp.common import (
    CONNECTION_CLOSED,
    SDK_ERRORS,
    McpCallError,
    McpServer,
    McpStartError,
    ToolCheckedSession,
    error_code,
    notification_method,
    stderr_tail,
    wire,
)
from toolproof.sources.mcp.stdio import (
    EXIT_WAIT_SECONDS,
    JunkReport,
    exit_description,
    read_status,
    stdio_parameters,
)
from toolproof.sources.mcp.trace import Outbox, SessionFacts, traced
from toolproof.tools.catalog import NOTICES
from toolproof.tools.context import CallChannel, current_channel
from toolproof.tools.idempotency import IDEMPOTENCY_META_KEY, current_idempotency_key

__all__ = ["McpConnection"]

logger = logging.getLogger("toolproof.mcp")

_mcp_types: Any = importlib.import_module("mcp.types")
INVALID_REQUEST = -32600
"""JSON-RPC: the request cannot be served (a relayed request with no single caller)."""
INTERNAL_ERROR = -32603
"""JSON-RPC: the relayed request failed on the caller's side."""
_CLOSE_GRACE = 8.0
"""Seconds :meth:`McpConnection.aclose` waits for the SDK's own shutdown before cancelling it."""


class McpConnection:
    """A client session with one MCP server, alive from :meth:`start` to :meth:`aclose`.

    Args:
        server: where the server is and its timeouts.
        on_list_changed: called (no arguments) for each ``notifications/tools/list_changed``.
        on_notice: awaited with ``(method, params)`` (wire form) for each notification of
            :data:`~toolproof.tools.catalog.NOTICES` (resource updates and list changes).

    """

    def __init__(
        self,
        server: McpServer,
        on_list_changed: Callable[[], None],
        on_notice: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.server = server
        self._on_list_changed = on_list_changed
        self._on_notice = on_notice
        self._session: ClientSession | None = None
        self._stderr: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope = anyio.CancelScope()  # entered by the owner task; cancelled to abort
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self.initialize: dict[str, Any] = {}
        self.tools: list[dict[str, Any]] = []
        self._inflight: list[CallChannel] = []  # the channels of the calls in flight
        self.listings: dict[str, list[dict[str, Any]]] = {}  # resources, templates, prompts
        self.skipped: list[str] = []  # optional list methods the server lacks (-32601)
        self._phase = "initialize"  # the MCP method start() is waiting for
        self._status: str | None = None  # the stdio server's exit-status file
        self._junk = JunkReport(server.name)  # its stdout lines that are not JSON-RPC
        self.facts = SessionFacts(server)  # what its client spans share
        self._session_id_of: Callable[[], str | None] | None = None  # 1.x streamable HTTP

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
        await self._ready.wait()
        if self._session is None:
            await self._stop_task()
            reason = self._start_reason()
            ended = await self.exit_status()
            if ended is not None and "closed the connection" in reason:
                reason += f" (the server process {ended})"
            tail = stderr_tail(self._stderr) if self.server.command is not None else None
            await self.aclose()
            raise McpStartError(reason, tail)

    def _start_reason(self) -> str:
        exc = self._failure
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        waited = (
            "initialize and tools/list"
            if self._phase in ("initialize", "tools/list")
            else f"initialize, tools/list and {self._phase}"
        )
        if isinstance(exc, TimeoutError):
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

    async def _open(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        server = self.server
        if server.command is not None:
            assert self._status is not None
            params = stdio_parameters(server, self._status)
            streams = await stack.enter_async_context(stdio_client(params, errlog=self._stderr))  # type: ignore[arg-type]
            return streams[0], Outbox(streams[1])
        module: Any = importlib.import_module("mcp.client.streamable_http")
        if hasattr(module, "streamable_http_client"):  # 2.x: headers live on the HTTP client
            client = await stack.enter_async_context(
                module.create_mcp_http_client(headers=dict(server.headers))
            )
            client.event_hooks["response"].append(self.facts.on_response)
            streams = await stack.enter_async_context(
                module.streamable_http_client(server.url, http_client=client)
            )
        else:  # 1.x
            opened: Any = await stack.enter_async_context(
                module.streamablehttp_client(server.url, headers=dict(server.headers))
            )
            self._session_id_of = opened[2]
            return opened[0], Outbox(opened[1])
        return streams[0], Outbox(streams[1])

    async def _run(self) -> None:
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    read, write = await self._open(stack)
                    session = await stack.enter_async_context(
                        ToolCheckedSession(
                            read,
                            write,
                            sampling_callback=self._on_sampling,
                            elicitation_callback=self._on_elicitation,
                            logging_callback=self._on_log,
                            message_handler=self._on_message,
                        )
                    )
                    with anyio.fail_after(self.server.startup_timeout):
                        self.initialize = wire(await session.initialize())
                        self._note_session()
                        self._phase = "tools/list"
                        self.tools = await list_tools(session)
                        self.listings, self.skipped = await list_catalog(
                            session, self.initialize, self._enter
                        )
                    self._session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # recorded; start() and call_tool() report it
            self._failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            self._ready.set()

    def _enter(self, method: str) -> None:
        self._phase = method

    @property
    def closing(self) -> bool:
        """Whether :meth:`aclose` has begun (a request failing now is the shutdown's doing)."""
        return self._stop.is_set()

    def _note_session(self) -> None:
        version = self.initialize.get("protocolVersion")
        self.facts.protocol_version = version if isinstance(version, str) else None
        if self._session_id_of is not None:
            self.facts.session_id = self._session_id_of()

    async def relist(self) -> list[dict[str, Any]]:
        """List the server's tools again (wire form), after a ``list_changed``.

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
            tools = await list_tools(session)
        return tools

    def _caller(self) -> CallChannel | None:
        """The channel of the one call in flight; ``None`` when there are none or several."""
        return self._inflight[0] if len(self._inflight) == 1 else None

    async def _on_log(self, params: Any) -> None:
        level = getattr(params, "level", "info")
        data = getattr(params, "data", None)
        channel = self._caller()
        if channel is not None:
            await channel.log(str(level), data, getattr(params, "logger", None))
            return
        logger.debug("MCP server %r log [%s]: %s", self.server.name, level, data)

    async def _relay(self, method: str, params: Any, result_type: Any) -> Any:
        channel = self._caller()
        if channel is None:
            why = (
                "no call of this server is in flight"
                if not self._inflight
                else (f"{len(self._inflight)} calls of this server are in flight (ambiguous)")
            )
            return _mcp_types.ErrorData(code=INVALID_REQUEST, message=f"{method}: {why}")
        try:
            ask = channel.sample if method == "sampling/createMessage" else channel.elicit
            return result_type.model_validate(await ask(wire(params)))
        except ToolCallError as exc:
            return _mcp_types.ErrorData(code=INTERNAL_ERROR, message=exc.failure.message)

    async def _on_sampling(self, context: Any, params: Any) -> Any:
        return await self._relay("sampling/createMessage", params, _mcp_types.CreateMessageResult)

    async def _on_elicitation(self, context: Any, params: Any) -> Any:
        return await self._relay("elicitation/create", params, _mcp_types.ElicitResult)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._junk.note(message)
            return
        method = notification_method(message)
        if method == "notifications/tools/list_changed":
            self._on_list_changed()
        if method in NOTICES and self._on_notice is not None:
            params = getattr(getattr(message, "root", message), "params", None)
            await self._on_notice(method, wire(params) if params is not None else {})

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
        channel = current_channel()
        if channel is not None:
            self._inflight.append(channel)
        try:
            return await traced(
                self.facts, "tools/call", tool, lambda meta: self._send_call(tool, arguments, meta)
            )
        finally:
            if channel is not None:
                self._inflight.remove(channel)

    async def _send_call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, str]
    ) -> dict[str, Any]:
        """One ``tools/call`` with ``meta`` as ``params._meta``; its result, wire form.

        The running call's idempotency key, when it has one, joins ``meta`` as
        ``io.toolproof/idempotency-key`` (:mod:`toolproof.tools.idempotency`).

        Raises:
            McpCallError: see :meth:`call_tool`.

        """
        session = self._session
        name = self.server.name
        if session is None:
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
                result = await session.call_tool(
                    tool, arguments, progress_callback=progress, **extra
                )
        except RuntimeError as exc:  # the SDK's own outputSchema check
            raise McpCallError(
                "invalid_result", f"MCP client refused the tools/call result: {exc}"
            ) from exc
        except ValueError as exc:  # pydantic: a result that is not a CallToolResult
            raise McpCallError(
                "protocol", f"MCP server {name!r} sent a malformed tools/call result: {exc}"
            ) from exc
        return wire(result)

    async def request(self, method: str, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
        """Send one request (``send(session)``) within ``call_timeout``; its result, wire form.

        Raises:
            McpCallError: as :meth:`call_tool`: not connected, timeout, a JSON-RPC error,
                a broken connection; the message names ``method``.

        """
        session = self._session
        name = self.server.name
        if session is None:
            raise McpCallError(
                "transport", f"MCP server {name!r} is not connected; {method} not sent"
            )

        async def once(meta: dict[str, str]) -> dict[str, Any]:
            async with self._answering(method):
                answer = await send(session)
            return wire(answer)

        return await traced(self.facts, method, None, once)

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
