"""A person logs in to an OAuth-protected ``[[mcp]]`` server once: ``toolproof mcp login``.

:class:`LocalhostAuthorizer` is the person's side of the authorization-code grant
(RFC 8252, OAuth for native apps): it listens on a loopback port for the redirect
(``http://127.0.0.1:PORT/callback``), opens the authorization URL in the browser (or
prints it when there is no browser: open it anywhere whose browser reaches this
machine's loopback, ``ssh -L PORT:127.0.0.1:PORT`` from another one) and hands the
redirect back. :func:`login` drives the SDK's flow (:mod:`toolproof.sources.mcp.oauth`)
by connecting to the server as a load does, with the stored tokens dropped first; it
returns what was granted, never a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass, replace
from ipaddress import ip_address
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from toolproof.sources.mcp.common import McpServer, McpStartError
from toolproof.sources.mcp.connection import McpConnection
from toolproof.sources.mcp.oauth import (
    Authorizer,
    OAuthSetupError,
    TokenFile,
)

__all__ = ["LocalhostAuthorizer", "LoginOutcome", "login", "login_port"]

logger = logging.getLogger("toolproof.mcp")

CALLBACK_PATH = "/callback"
LOGIN_TIMEOUT = 600.0
"""Seconds :func:`login` waits for the person by default (from the connection to the grant)."""
_PAGE = (
    "<!doctype html><title>toolproof</title><p>{}</p>"
    "<p>You can close this tab and return to the terminal.</p>"
)


@dataclass(frozen=True)
class LoginOutcome:
    """What a login obtained (no token: those stay in the token file).

    Attributes:
        server: the ``[[mcp]]`` name.
        token_file: where the tokens are (``0600``).
        scope: the granted scope (space-separated), or ``None`` when the server names none.
        refreshable: whether a refresh token was issued (loads renew the access token).
        tools: how many tools the server lists to the new token.

    """

    server: str
    token_file: str
    scope: str | None
    refreshable: bool
    tools: int


class LocalhostAuthorizer:
    """The browser of the person at this machine, back through a loopback listener.

    Use as ``async with LocalhostAuthorizer() as authorizer:``; the listener lives
    until the block ends.

    Args:
        port: the loopback port of the redirect URI (``0``: any free one).
        open_browser: open the authorization URL with :mod:`webbrowser`; when ``False``
            or when no browser opens, the URL is only shown.
        show: where the person is told what to open (a line of text).
        timeout: seconds one authorization may take before it fails.

    Raises:
        OAuthSetupError: (on entry) the port cannot be bound.

    """

    def __init__(
        self,
        port: int = 0,
        *,
        open_browser: bool = True,
        show: Callable[[str], None] = print,
        timeout: float = LOGIN_TIMEOUT,
    ) -> None:
        self.port = port
        self.open_browser = open_browser
        self.show = show
        self.timeout = timeout
        self._landed: asyncio.Queue[str] = asyncio.Queue()
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def redirect_uri(self) -> str:
        """``http://127.0.0.1:PORT/callback`` (the bound port once entered)."""
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> LocalhostAuthorizer:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse
        from starlette.routing import Route

        async def callback(request: Request) -> HTMLResponse:
            await self._landed.put(str(request.url))
            said = "Authorization refused." if "error" in request.query_params else "Logged in."
            return HTMLResponse(_PAGE.format(said))

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", self.port))
        except OSError as exc:
            sock.close()
            raise OAuthSetupError(
                f"cannot listen on 127.0.0.1:{self.port} for the redirect: {exc.strerror} "
                "(rule: the redirect URI's loopback port must be free; --port picks another)"
            ) from None
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route(CALLBACK_PATH, callback)])
        config = uvicorn.Config(app, log_level="error", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def authorize(self, url: str) -> str:
        """Show (and open) ``url``; the URL the browser is redirected to.

        Raises:
            OAuthSetupError: nothing came back within ``timeout`` seconds.

        """
        opened = False
        if self.open_browser:
            with contextlib.suppress(webbrowser.Error):
                opened = webbrowser.open(url)
        lead = "A browser was opened; if not, open" if opened else "Open"
        self.show(f"{lead} this URL to authorize (waiting on {self.redirect_uri}):\n{url}")
        try:
            return await asyncio.wait_for(self._landed.get(), self.timeout)
        except TimeoutError:
            raise OAuthSetupError(
                f"no authorization came back to {self.redirect_uri} within {self.timeout:g} s"
                " (rule: the browser must reach this machine's loopback address)"
            ) from None


def login_port(server: McpServer, port: int | None = None) -> int:
    """The loopback port a login listens on.

    ``port``, else ``[mcp.auth] redirect_port``, else the one the stored registration was
    made with (its redirect URI must match), else ``0`` (any).
    """
    if port is not None:
        return port
    auth = server.auth
    if auth is None:
        return 0
    if auth.redirect_port is not None:
        return auth.redirect_port
    known = TokenFile(Path(auth.token_file)).stored_client()
    if known is not None and known.redirect_uris:
        parts = urlsplit(str(known.redirect_uris[0]))
        with contextlib.suppress(ValueError):
            if ip_address(parts.hostname or "").is_loopback and parts.port:
                return parts.port
    return 0


async def login(
    server: McpServer, authorizer: Authorizer, *, timeout: float = LOGIN_TIMEOUT
) -> LoginOutcome:
    """Authorize with ``server`` now through ``authorizer`` and store the tokens.

    The stored tokens are not used (nor touched: a failed login leaves them working;
    the new ones replace them whole once the exchange succeeds), then the server is
    connected as a load connects (the SDK's flow: metadata discovery, CIMD or dynamic
    registration, PKCE, RFC 8707 ``resource``, the ``iss`` check) and its tools listed
    with the new token.

    Args:
        server: a streamable-HTTP server with an ``[mcp.auth]``.
        authorizer: who authorizes (a person: :class:`LocalhostAuthorizer`).
        timeout: seconds from connecting to the listing (the person's time included).

    Raises:
        OAuthSetupError: the server has no URL or no ``[mcp.auth]``, or its auth cannot
            be used.
        McpStartError: the flow or the connection failed (the reason names the step;
            no token is in it).

    """
    if server.url is None or server.auth is None:
        raise OAuthSetupError(
            f"MCP server {server.name!r} has no [mcp.auth] (rule: mcp login is for "
            "streamable-HTTP servers with an auth table)"
        )
    auth = replace(server.auth, authorizer=authorizer, fresh=True)
    store = TokenFile(Path(auth.token_file))
    before = store.read().get("tokens")
    chosen = replace(server, auth=auth, startup_timeout=max(server.startup_timeout, timeout))
    connection = McpConnection(chosen, on_list_changed=lambda: None)
    try:
        await connection.start()
        listed = len(connection.tools)
    finally:
        await connection.aclose()
    tokens = store.read().get("tokens")
    if not isinstance(tokens, dict) or tokens == before:  # the server asked for nothing
        raise McpStartError("the server did not ask for authorization (no token was issued)", None)
    scope = tokens.get("scope")
    logger.info("MCP server %r: logged in (scope %s)", server.name, json.dumps(scope))
    return LoginOutcome(
        server=server.name,
        token_file=auth.token_file,
        scope=scope if isinstance(scope, str) else None,
        refreshable=bool(tokens.get("refresh_token")),
        tools=listed,
    )
