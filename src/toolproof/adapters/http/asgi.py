"""Run an ASGI app with uvicorn under toolproof's own signal handling.

uvicorn's ``Server.serve`` installs SIGINT/SIGTERM handlers and re-raises the signal
once it has shut down, which would kill the process before a recorded session is
finalized. :func:`serve_asgi` leaves signals to the caller: it serves until an
:class:`asyncio.Event` is set, then shuts down gracefully (in-flight requests
finish) and returns.

Connections are bounded (both servers, ``serve --http`` and ``serve-api``): request
headers must arrive within :data:`HEADER_TIMEOUT` seconds and fit in
:data:`MAX_HEADER_BYTES` (a 431 above); above :data:`MAX_CONCURRENCY` connections and requests a
new request is answered 503; an idle kept-alive connection closes after
:data:`KEEP_ALIVE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Generator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolproof.errors import InputError

__all__ = [
    "HEADER_TIMEOUT",
    "KEEP_ALIVE_SECONDS",
    "MAX_CONCURRENCY",
    "MAX_HEADER_BYTES",
    "serve_asgi",
]


HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's headers (the first request, and
each next one on a kept-alive connection); a slower client is disconnected."""
MAX_HEADER_BYTES = 16 * 1024
"""The largest request head (request line and headers) accepted, in bytes (a 431 above)."""
MAX_CONCURRENCY = 256
"""Open connections plus requests in progress above which a new request is answered 503."""
KEEP_ALIVE_SECONDS = 5
"""Seconds an idle kept-alive connection stays open."""


class _BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for request headers (uvicorn has none).

    A client that sends its headers slowly (a byte at a time, or nothing at all)
    would otherwise hold a connection forever; after :data:`HEADER_TIMEOUT` seconds
    without a complete request head the connection is closed.
    """

    header_timeout = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)


class _HeadLimit:
    """ASGI middleware: answer 431 to a request whose head is over ``limit`` bytes.

    h11's own bound only applies to a head still arriving; one that arrives whole in a
    single read is parsed whatever its size. This counts the parsed request line and
    headers (``name: value`` plus CRLF each) before the app sees the request.
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            size += sum(len(name) + len(value) + 4 for name, value in scope.get("headers", []))
            if size > self.limit:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1009})
                    return
                message = (
                    f"the request head is {size} bytes; the limit is {self.limit} bytes "
                    "(request line and headers)"
                )
                body = json.dumps(
                    {
                        "status": 431,
                        "error": "headers-too-large",
                        "message": message,
                        "fields": {},
                    }
                ).encode("utf-8")
                await send(
                    {
                        "type": "http.response.start",
                        "status": 431,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_asgi(
    app: Any,
    host: str,
    port: int,
    stop: asyncio.Event,
    *,
    ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` until ``stop`` is set; return after a graceful shutdown.

    Args:
        app: an ASGI application.
        host: the address to bind (``127.0.0.1``, ``::1``, ``0.0.0.0``).
        port: the TCP port (0 is not supported: callers pick the port).
        stop: set it to shut the server down.
        ready: called once the socket listens (to announce the server: a client that
            reads the announcement can connect at once).

    Raises:
        InputError: the address cannot be bound, or the app failed to start.

    """
    config = uvicorn.Config(
        _HeadLimit(app, MAX_HEADER_BYTES),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=10,
        http=_BoundedH11,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=MAX_CONCURRENCY,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    server = _Server(config)

    async def watch() -> None:
        await stop.wait()
        server.should_exit = True

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        if ready is not None:
            ready()

    watcher = asyncio.create_task(watch())
    announcer = asyncio.create_task(announce())
    try:
        await server.serve()
    except SystemExit as exc:
        raise InputError(
            f"cannot serve on {host}:{port}: the address is in use or not available here "
            f"(uvicorn stopped with code {exc.code})",
            host=host,
            port=port,
        ) from None
    finally:
        watcher.cancel()
        announcer.cancel()
    if not server.started and not stop.is_set():
        raise InputError(f"cannot serve on {host}:{port}: the server did not start", host=host)
