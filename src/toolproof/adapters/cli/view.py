"""``toolproof view``: the run viewer in the browser, over one artifact root."""

from __future__ import annotations

import asyncio
import socket
import webbrowser
from pathlib import Path

import typer

from toolproof.adapters.cli.app import ToolproofCommand, docs_epilog, err_console, run_async
from toolproof.errors import InputError
from toolproof.version import install_hint

__all__ = ["register"]


def free_port(host: str) -> int:
    """A TCP port that is free on ``host`` now (the OS picks it).

    Raises:
        InputError: ``host`` cannot be bound.

    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            return int(probe.getsockname()[1])
    except OSError as exc:
        raise InputError(f"cannot bind {host!r}: {exc.strerror or exc}", host=host) from None


async def _view(
    root: Path, host: str, port: int, token_file: Path | None, open_browser: bool
) -> None:
    from toolproof.adapters.http.tokens import is_loopback

    try:
        from toolproof.adapters.http.settings import ApiSettings, resolve_token
        from toolproof.adapters.viewer import create_viewer_app
    except ImportError as exc:
        raise InputError(f"view needs the http extra: {install_hint('http')} ({exc})") from exc
    from toolproof.adapters.cli.serve import _stop_on_signals
    from toolproof.adapters.http.asgi import serve_asgi

    if not root.is_dir():
        raise InputError(f"--root {str(root)!r}: not a directory", path=str(root))
    loopback = is_loopback(host)
    token = resolve_token(None, token_file) if (token_file is not None or not loopback) else None
    if token is None and not loopback:
        raise InputError(
            f"the viewer needs a bearer token off loopback (--host {host}): pass --token-file "
            "FILE or set TOOLPROOF_API_TOKEN",
            host=host,
        )
    bound = port or free_port(host)
    settings = ApiSettings(
        root=root.resolve(), token=token, auth_disabled=token is None, host=host, port=bound
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    link = url + (f"#token={token}" if token else "")

    def ready() -> None:
        err_console.print(f"toolproof: viewing runs under {settings.root} at {url}")
        if token:
            err_console.print("toolproof: open it with the token in the fragment: URL#token=TOKEN")
        if open_browser:
            webbrowser.open(link)

    stop = asyncio.Event()
    _stop_on_signals(stop)
    await serve_asgi(create_viewer_app(settings), host, bound, stop, ready=ready)


def register(app: typer.Typer) -> None:
    """Add ``view`` to the CLI."""

    @app.command("view", cls=ToolproofCommand, epilog=docs_epilog("viewer.md"))
    def view(
        root: Path = typer.Option(
            Path("."), "--root", "-r", help="The artifact root (runs live in ROOT/runs)."
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="The address to bind."),
        port: int = typer.Option(
            0, "--port", min=0, max=65535, help="The TCP port (0: a free one)."
        ),
        token_file: Path | None = typer.Option(
            None,
            "--token-file",
            help="A file whose first line is the bearer token (default $TOOLPROOF_API_TOKEN); "
            "required off loopback.",
        ),
        open_browser: bool = typer.Option(False, "--open", help="Open the viewer in a browser."),
    ) -> None:
        """Serve a read-only web viewer over the runs under ROOT (see docs/viewer.md)."""
        run_async(_view(root, host, port, token_file, open_browser))
