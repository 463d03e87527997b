"""The typer application, its error handling and its output helpers.

Exit codes (DESIGN.md section 8): 0 ok, 1 usage or input error, 2 verification or
replay failure; the mapping lives in :func:`toolproof.errors.error_mapping`.
Every command takes ``--json`` and then prints exactly one canonical JSON document
on stdout.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from toolproof import __version__
from toolproof.errors import ToolproofError, UsageError, error_mapping
from toolproof.identity import canonical_json

__all__ = ["app", "emit_json", "err_console", "fail", "main", "out_console", "run_async"]

app = typer.Typer(
    name="toolproof",
    help="Agent tools that can be trusted: validated tools, named variants, evidence-chained runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")


def emit_json(value: Any) -> None:
    """Write one canonical JSON document (RFC 8785) and a newline to stdout."""
    sys.stdout.buffer.write(canonical_json(value) + b"\n")
    sys.stdout.flush()


def fail(error: BaseException) -> typer.Exit:
    """Print ``error`` as one line on stderr; return the ``typer.Exit`` with its exit code."""
    message = error.message if isinstance(error, ToolproofError) else str(error)
    message = " ".join(line.strip() for line in message.splitlines() if line.strip())
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    return typer.Exit(error_mapping(error).exit_code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion; toolproof errors become a one-line error and an exit code."""
    try:
        return asyncio.run(coro)
    except (ToolproofError, UsageError) as exc:
        raise fail(exc) from None


def _version(value: bool) -> None:
    if value:
        print(f"toolproof {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Agent tools that can be trusted."""


_COMMAND_MODULES: tuple[str, ...] = (
    "toolproof.adapters.cli.tools",
    "toolproof.adapters.cli.extensions",
    "toolproof.adapters.cli.corpus",
    "toolproof.adapters.cli.serve",
    "toolproof.adapters.cli.runs",
    "toolproof.adapters.cli.worker",
    "toolproof.adapters.cli.attest",
    "toolproof.adapters.cli.lock",
)
"""Modules that each define ``register(app)``; one per command group, added as they land."""


def _register() -> None:
    import importlib

    for module in _COMMAND_MODULES:
        importlib.import_module(module).register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``toolproof`` console script."""
    command: Callable[..., Any] = typer.main.get_command(app)
    command(args=argv, prog_name="toolproof")
