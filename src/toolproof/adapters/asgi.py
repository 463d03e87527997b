"""Run an ASGI app with uvicorn under toolproof's own signal handling.

uvicorn's ``Server.serve`` installs SIGINT/SIGTERM handlers and re-raises the signal
once it has shut down, which would kill the process before a recorded session is
finalized. :func:`serve_asgi` leaves signals to the caller: it serves until an
:class:`asyncio.Event` is set, then shuts down gracefully (in-flight requests
finish) and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator
from typing import Any

import uvicorn

from toolproof.errors import InputError

__all__ = ["serve_asgi"]


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
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=10,
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
