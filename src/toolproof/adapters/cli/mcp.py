"""``toolproof mcp``: the ``[[mcp]]`` servers a composition root imports.

``mcp login NAME --config FILE`` authorizes with an OAuth-protected streamable-HTTP
server once, as a person: the browser opens the authorization server's page (or, with
``--no-browser`` or no browser, the URL is printed to open anywhere that reaches this
machine's loopback); the redirect comes back to ``127.0.0.1:PORT``; the tokens go to
the server's token file (``0600``), which every later load uses and refreshes. Exit 1:
the config is invalid or the authorization failed. See ``docs/mcp.md`` (*OAuth*).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    ToolproofGroup,
    docs_epilog,
    emit_json,
    err_console,
    out_console,
    run_async,
)
from toolproof.adapters.cli.options import ConfigOption, JsonOption
from toolproof.errors import AuthenticationError, ToolproofError

__all__ = ["mcp_app", "register"]

_DOC = docs_epilog("mcp.md")

mcp_app = typer.Typer(
    cls=ToolproofGroup,
    help="The MCP servers a composition root imports: log in to one (OAuth).",
    epilog=_DOC,
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to ``app``."""
    app.add_typer(mcp_app, name="mcp")


def _show(line: str) -> None:
    err_console.print(escape(line))


@mcp_app.command("login", cls=ToolproofCommand, epilog=_DOC)
def login(
    name: str = typer.Argument(..., help="The name of the server's mcp entry."),
    config: Path = ConfigOption,
    browser: bool = typer.Option(
        True, "--browser/--no-browser", help="Open the authorization URL in a browser."
    ),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="The loopback port of the redirect URI."
    ),
    timeout: float = typer.Option(600.0, "--timeout", min=1, help="Seconds to wait in all."),
    as_json: bool = JsonOption,
) -> None:
    """Log in to the OAuth-protected server NAME once; loads reuse the stored tokens."""
    from toolproof.config import load_config, mcp_login
    from toolproof.sources.mcp.common import McpStartError
    from toolproof.sources.mcp.login import LocalhostAuthorizer, login_port
    from toolproof.sources.mcp.oauth import OAuthSetupError

    async def go() -> object:
        parsed, _ = load_config(config)
        entries = {entry.name: entry for entry in parsed.mcp}
        chosen = port
        if name in entries:
            chosen = login_port(entries[name].server(config.parent), port)
        authorizer = LocalhostAuthorizer(
            chosen or 0, open_browser=browser, show=_show, timeout=timeout
        )
        async with authorizer:
            return await mcp_login(config, name, authorizer, timeout=timeout)

    try:
        try:
            outcome = run_async(go())
        except (OAuthSetupError, McpStartError) as exc:
            raise AuthenticationError(f"MCP server {name!r}: login failed: {exc}") from None
    except ToolproofError as exc:
        if as_json:  # one document on stdout also when the login fails
            emit_json({"server": name, "error": exc.message})
        raise
    from toolproof.sources.mcp.login import LoginOutcome

    assert isinstance(outcome, LoginOutcome)
    if as_json:
        emit_json(
            {
                "server": outcome.server,
                "token_file": outcome.token_file,
                "scope": outcome.scope,
                "refreshable": outcome.refreshable,
                "tools": outcome.tools,
            }
        )
        return
    scope = outcome.scope or "(none named)"
    out_console.print(
        f"logged in to {escape(outcome.server)}: scope {escape(scope)}, "
        f"{outcome.tools} tools; tokens in {escape(outcome.token_file)}"
        + ("" if outcome.refreshable else " (no refresh token: log in again when it expires)")
    )
