"""``toolproof serve`` (the Toolset over MCP) and ``toolproof serve-api`` (the runs HTTP API)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    docs_epilog,
    err_console,
    run_async,
)
from toolproof.adapters.cli.options import ConfigOption
from toolproof.adapters.cli.serve_record import check_session, end_recording, recover_command
from toolproof.adapters.cli.summary import count
from toolproof.adapters.cli.tools import print_quarantine
from toolproof.errors import InputError
from toolproof.version import install_hint

if TYPE_CHECKING:
    from toolproof.adapters.mcp.server import StdioWire
    from toolproof.runs.segments import SegmentedRecording
    from toolproof.tools.toolset import Toolset

__all__ = ["MCP_TOKEN_ENV", "parse_address", "recover_command", "register"]

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


MCP_TOKEN_ENV = "TOOLPROOF_MCP_TOKEN"
"""The environment variable that holds the bearer token of ``serve --http``."""


def _mcp_token(host: str, token_file: Path | None, clients: bool = False) -> str | None:
    """The single bearer token of ``serve --http`` (``None`` with ``--clients``: theirs).

    Raises:
        InputError: a bad token, ``--token-file`` with ``--clients``, or a host that is
            not loopback with neither.

    """
    from toolproof.adapters.http.tokens import is_loopback, resolve_token

    if clients:
        if token_file is not None:
            raise InputError(
                "--clients and --token-file are two ways to say who may call: give one "
                "(--clients names each client's token; $TOOLPROOF_MCP_TOKEN is not used with it)"
            )
        return None
    token = resolve_token(None, token_file, MCP_TOKEN_ENV)
    if token is None and not is_loopback(host):
        raise InputError(
            f"serving MCP over HTTP on {host!r} (not loopback) needs a bearer token: "
            f"pass --token-file FILE, --clients FILE or set {MCP_TOKEN_ENV}",
            host=host,
        )
    return token


async def _serve_mcp(
    config: Path,
    http: str | None,
    record: Path | None,
    token_file: Path | None = None,
    segment_calls: int | None = None,
    clients_file: Path | None = None,
    session: tuple[str, bool] = ("", False),
) -> None:
    check_session(record, *session)
    try:
        from toolproof.adapters.mcp.server import StdioWire
    except ImportError as exc:
        raise InputError(
            f"toolproof serve needs the mcp SDK 2.x: pip install 'mcp>=2.3' ({exc})"
        ) from exc

    from toolproof.adapters.http.tokens import load_named_tokens

    address = parse_address(http) if http is not None else None
    if clients_file is not None and address is None:
        raise InputError("--clients needs --http HOST:PORT (over stdio the client is the parent)")
    clients = load_named_tokens(clients_file, "--clients") if clients_file is not None else None
    token = _mcp_token(address[0], token_file, bool(clients)) if address is not None else None
    stop = asyncio.Event()
    _stop_on_signals(stop)
    # stdio: fd 1 carries JSON-RPC only, from before the first user module is imported
    wire = StdioWire() if address is None else None
    try:
        clean = await _serve_loaded(
            config, address, token, record, stop, wire, segment_calls, clients, session
        )
    finally:
        if wire is not None:
            wire.release()
    if not clean:
        # A stdio read blocked on an open stdin cannot be cancelled, and asyncio would wait
        # for it forever; the session manifest and the Toolset's workers are closed by now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


async def _serve_loaded(
    config: Path,
    address: tuple[str, int] | None,
    token: str | None,
    record: Path | None,
    stop: asyncio.Event,
    wire: StdioWire | None,
    segment_calls: int | None = None,
    clients: dict[str, str] | None = None,
    session: tuple[str, bool] = ("", False),
) -> bool:
    """Load the Toolset and serve it until stopped; return whether stdio ended cleanly."""
    from toolproof.adapters.mcp.server import (
        RecordingObserver,
        build_server,
        serve_http,
        serve_stdio,
    )
    from toolproof.adapters.mcp.tasks import task_tools
    from toolproof.adapters.telemetry.instrument import instrument_from_config
    from toolproof.config import CONFIG, load_toolset
    from toolproof.runs.segments import SegmentedRecording
    from toolproof.sessions.resuming import Resumption, resume_recording

    clean = True
    name, resume = session
    async with load_toolset(config, relay=True) as toolset:
        print_quarantine(toolset)
        if segment_calls is None:
            segment_calls = toolset.resources[CONFIG].serve.segment_calls
        recording: SegmentedRecording | None = None
        resumption: Resumption | None = None
        if record is not None and resume:  # the crashed session's record is served first
            recording, resumption = await resume_recording(
                record, name, toolset, segment_calls=segment_calls
            )
            err_console.print(
                f"toolproof: resuming session {name}: {count(len(resumption.run_ids), 'segment')} "
                "recorded; their calls are answered from the record, in order"
            )
            for item in resumption.resumed.dropped:  # as verify --recover prints them
                err_console.print(f"[yellow]dropped:[/] {escape(item)}")
        elif record is not None:
            recording = SegmentedRecording(record, toolset, segment_calls=segment_calls, name=name)
        failed = True
        stop_telemetry = instrument_from_config(toolset.resources[CONFIG].telemetry)
        try:
            observer = RecordingObserver(recording, resumption) if recording is not None else None
            server = build_server(
                toolset, observer=observer, tasks=task_tools(toolset.resources[CONFIG].serve.tasks)
            )
            if address is not None:
                host, port = address
                shown = f"[{host}]" if ":" in host else host
                serving = _count(toolset)
                await serve_http(
                    server,
                    host,
                    port,
                    stop,
                    token=token,
                    clients=clients,
                    ready=lambda: err_console.print(
                        f"toolproof: serving {serving} over MCP at http://{shown}:{port}/mcp"
                    ),
                )
                clean = True
            else:
                err_console.print(f"toolproof: serving {_count(toolset)} over MCP stdio")
                limit = toolset.resources[CONFIG].serve.max_message_bytes
                clean = await _until_stopped(serve_stdio(server, wire, limit=limit), stop)
            failed = False
        finally:
            stop_telemetry()
            if recording is not None:
                earlier = resumption.run_ids if resumption is not None else []
                await end_recording(recording, failed and recording.calls == 0, earlier)
    return clean


def _count(toolset: Toolset) -> str:
    """``1 tool``, ``12 tools`` or ``3 tools (2 hidden: a, b)``: what a server announces."""
    hidden = toolset.hidden()
    shown = count(len(toolset) - len(hidden), "tool")
    if hidden:
        shown += f" ({len(hidden)} hidden: {', '.join(hidden)})"
    return shown


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``serve-api`` to ``app``."""

    @app.command("serve", cls=ToolproofCommand, epilog=docs_epilog("serve.md"))
    def serve(
        config: Path = ConfigOption,
        http: str | None = typer.Option(
            None, "--http", help="Serve streamable HTTP on HOST:PORT (default: stdio)."
        ),
        record: Path | None = typer.Option(
            None,
            "--record",
            help="Record every call under the artifact root DIR; finalized into "
            "DIR/runs/<run_id> on SIGTERM/SIGINT.",
            metavar="DIR",
        ),
        token_file: Path | None = typer.Option(
            None,
            "--token-file",
            help="With --http: require this bearer token (the file's first line; "
            "default $TOOLPROOF_MCP_TOKEN). Required off loopback.",
        ),
        clients_file: Path | None = typer.Option(
            None,
            "--clients",
            help='With --http: named client tokens (TOML, NAME = "TOKEN" per line); each '
            "request carries one, and \\[policy] decides its calls for Agent::NAME.",
            metavar="FILE",
        ),
        segment_calls: int | None = typer.Option(
            None,
            "--segment-calls",
            min=0,
            help="With --record: seal the session into a run every N steps (0: one run; "
            "default \\[serve] segment_calls, 2000).",
            metavar="N",
        ),
        session_id: str | None = typer.Option(
            None,
            "--session-id",
            help="With --record: name the session (its live directory and idempotency keys); "
            "a named session logs each must-act-once call's intent, so it can --resume.",
            metavar="NAME",
        ),
        resume: bool = typer.Option(
            False,
            "--resume",
            help="Continue session --session-id that a crash or kill left: calls it recorded "
            "are answered from the record, in order; then recording goes on live.",
        ),
    ) -> None:
        """Serve every tool and variant of a toolproof.toml as an MCP server."""
        session = (session_id or "", resume)
        run_async(
            _serve_mcp(config, http, record, token_file, segment_calls, clients_file, session)
        )

    @app.command("serve-api", cls=ToolproofCommand, epilog=docs_epilog("serve.md"))
    def serve_api(
        root: Path = typer.Option(
            ..., "--root", "-r", help="The artifact root (runs live in ROOT/runs)."
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="The address to bind."),
        port: int = typer.Option(8080, "--port", min=1, max=65535, help="The TCP port."),
        token: str | None = typer.Option(
            None, "--token", help="The bearer token (visible in `ps`: prefer $TOOLPROOF_API_TOKEN)."
        ),
        token_file: Path | None = typer.Option(
            None, "--token-file", help="A file whose first line is the bearer token."
        ),
        no_auth: bool = typer.Option(
            False,
            "--no-auth",
            help="Serve without a token (only on a loopback address: 127.0.0.0/8 or ::1).",
        ),
        max_body: int = typer.Option(
            1024 * 1024, "--max-body-bytes", min=1, help="The largest request body, in bytes."
        ),
        max_response: int = typer.Option(
            16 * 1024 * 1024,
            "--max-response-bytes",
            min=1024,
            help="The largest document or trace page answered, in bytes.",
        ),
        approvals_store: Path | None = typer.Option(
            None,
            "--approvals-store",
            help="Serve /v1/approvals over this approvals store (the \\[approvals] store file).",
            metavar="FILE",
        ),
        approvers: Path | None = typer.Option(
            None,
            "--approvers",
            help='Named approver tokens for /v1/approvals: TOML, NAME = "TOKEN" per line.',
            metavar="FILE",
        ),
    ) -> None:
        """Serve the runs HTTP API (create, list, show, verify, replay) over one artifact root."""
        run_async(
            _serve_api(
                root,
                host,
                port,
                token,
                token_file,
                no_auth,
                max_body,
                max_response,
                approvals_store=approvals_store,
                approvers=approvers,
            )
        )


async def _serve_api(
    root: Path,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    no_auth: bool,
    max_body: int,
    max_response: int = 16 * 1024 * 1024,
    *,
    approvals_store: Path | None = None,
    approvers: Path | None = None,
) -> None:
    try:
        from toolproof.adapters.http import ApiSettings, create_app
    except ImportError as exc:
        raise InputError(f"serve-api needs the http extra: {install_hint('http')} ({exc})") from exc
    from toolproof.adapters.http.asgi import serve_asgi
    from toolproof.adapters.http.settings import resolve_token
    from toolproof.adapters.http.tokens import load_named_tokens

    if not root.is_dir():
        raise InputError(f"--root {str(root)!r}: not a directory", path=str(root))
    if approvers is not None and approvals_store is None:
        raise InputError("--approvers needs --approvals-store FILE (the store to decide in)")
    settings = ApiSettings(
        root=root.resolve(),
        token=None if no_auth else resolve_token(token, token_file),
        auth_disabled=no_auth,
        host=host,
        port=port,
        max_body_bytes=max_body,
        max_response_bytes=max_response,
        approvals_store=approvals_store.resolve() if approvals_store is not None else None,
        approvers=load_named_tokens(approvers) if approvers is not None else {},
    )
    stop = asyncio.Event()
    _stop_on_signals(stop)
    shown = f"[{host}]" if ":" in host else host
    await serve_asgi(
        create_app(settings),
        host,
        port,
        stop,
        ready=lambda: err_console.print(
            f"toolproof: serving the runs API on http://{shown}:{port}/v1"
        ),
    )
