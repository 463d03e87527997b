"""``toolproof serve`` (the Toolset over MCP) and ``toolproof serve-api`` (the runs HTTP API)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import typer

from toolproof.adapters.cli.app import err_console, run_async
from toolproof.config import load_toolset
from toolproof.errors import InputError

__all__ = ["parse_address", "register"]

STDIO_GRACE_SECONDS = 1.0
"""How long a stdio server may take to stop after a signal before the process exits anyway
(a read blocked on an open stdin cannot be interrupted)."""


def parse_address(text: str, option: str = "--http") -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``127.0.0.1:8000``, ``[::1]:8000``, ``localhost:8000``).

    Raises:
        InputError: not ``HOST:PORT``, or the port is not 1-65535.

    """
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InputError(
            f"{option} {text!r}: expected HOST:PORT with a port in 1-65535 "
            "(e.g. 127.0.0.1:8000 or [::1]:8000)"
        )
    return host, int(port_text)


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def _until_stopped(serving: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run ``serving`` until it ends or ``stop`` is set; return whether it ended on its own."""
    task = asyncio.ensure_future(serving)
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), STDIO_GRACE_SECONDS)
    return task.done()


async def _serve_mcp(config: Path, http: str | None) -> None:
    from toolproof.adapters.mcp_server import build_server, serve_http, serve_stdio

    address = parse_address(http) if http is not None else None
    stop = asyncio.Event()
    _stop_on_signals(stop)
    async with load_toolset(config) as toolset:
        server = build_server(toolset)
        if address is not None:
            host, port = address
            err_console.print(f"toolproof: serving MCP on http://{host}:{port}/mcp")
            await serve_http(server, host, port, stop)
            clean = True
        else:
            clean = await _until_stopped(serve_stdio(server), stop)
    if not clean:
        # A stdio read blocked on an open stdin cannot be cancelled, and asyncio would wait
        # for it forever; the session manifest and the Toolset's workers are closed by now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``serve-api`` to ``app``."""

    @app.command("serve")
    def serve(
        config: Path = typer.Option(
            Path("toolproof.toml"), "--config", "-c", help="The composition root (toolproof.toml)."
        ),
        http: str | None = typer.Option(
            None, "--http", help="Serve streamable HTTP on HOST:PORT (default: stdio)."
        ),
    ) -> None:
        """Serve every tool and variant of a toolproof.toml as an MCP server."""
        run_async(_serve_mcp(config, http))
