"""The typer application, its one error handler and its output helpers.

Exit codes (DESIGN.md section 8, docs/runs.md): 0 ok, 1 usage or input error, 2
verification failed or replay refused. A usage error of the command line (no
arguments, an unknown command or option, an extra argument such as ``--json true``)
exits 1; every other exit code comes from :func:`toolproof.errors.error_mapping`,
applied once, by :meth:`ToolproofGroup.main`. Commands raise errors (or
:func:`exit_for` an outcome) and never pick an exit code themselves. Every command
takes ``--json`` and then prints exactly one canonical JSON document on stdout.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

from toolproof.errors import ToolproofError, UsageError, error_mapping, mapping_for
from toolproof.identity import canonical_json
from toolproof.version import __version__

__all__ = [
    "USAGE_EXIT_CODE",
    "ToolproofCommand",
    "ToolproofGroup",
    "app",
    "docs_epilog",
    "emit_json",
    "err_console",
    "exit_for",
    "main",
    "out_console",
    "report_error",
    "run_async",
]

USAGE_EXIT_CODE = 1
"""The exit code of a command-line usage error (click's own default is 2, which
toolproof's contract gives to a failed verification)."""

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")


def docs_epilog(page: str) -> str:
    """The last line of a command's help: the page of ``docs/`` that documents it."""
    return f"Documentation: docs/{page}"


def emit_json(value: Any) -> None:
    """Write one canonical JSON document (RFC 8785) and a newline to stdout."""
    sys.stdout.buffer.write(canonical_json(value) + b"\n")
    sys.stdout.flush()


def report_error(error: BaseException) -> int:
    """Print ``error`` as one line on stderr; return its exit code (from the error table)."""
    message = error.message if isinstance(error, ToolproofError) else str(error)
    message = " ".join(line.strip() for line in message.splitlines() if line.strip())
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    return error_mapping(error).exit_code


def exit_for(outcome: type[BaseException]) -> typer.Exit:
    """The exit of a command whose outcome (already printed) is an error of class ``outcome``.

    ``raise exit_for(VerificationError)`` ends a ``verify`` whose report was shown and
    failed: the exit code is the table's (:func:`toolproof.errors.mapping_for`), never a
    literal.
    """
    return typer.Exit(mapping_for(outcome).exit_code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion (errors reach the one handler of :class:`ToolproofGroup`)."""
    return asyncio.run(coro)


_SDK_FLOW_LOGGER = "mcp.client.auth.oauth2"
"""The MCP SDK's OAuth logger: it logs a failed flow with its traceback before raising."""


class _OneLineErrors(logging.Filter):
    """Log a record's exception as ``message: Type: text`` on its one line (no traceback).

    The MCP SDK logs ``OAuth flow error`` with a traceback and then raises the same
    error, which the command reports as its ``error:`` line; under the command line the
    traceback is only noise, the exception's type and text stay on the line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Fold the exception into the message; keep the record."""
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()}: {type(error).__name__}: {error}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _one_line_sdk_logs() -> None:
    """Put :class:`_OneLineErrors` on the MCP SDK's OAuth logger (once)."""
    flow = logging.getLogger(_SDK_FLOW_LOGGER)
    if not any(isinstance(known, _OneLineErrors) for known in flow.filters):
        flow.addFilter(_OneLineErrors())


def _plain_usage(command: typer.core.TyperCommand, ctx: typer.Context) -> list[str]:
    """Usage pieces with arguments as ``NAME`` / ``[NAME]`` (not typer's ``{name}``)."""
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if isinstance(param, typer.core.TyperArgument):
            name = (param.metavar or param.name or "arg").upper()
            name = name if param.required else f"[{name}]"
            pieces.append(name + ("..." if param.nargs != 1 else ""))
        else:
            pieces.extend(param.get_usage_pieces(ctx))
    return pieces


def _polish_params(command: typer.core.TyperCommand | typer.core.TyperGroup) -> None:
    """Flags show no value placeholder; arguments are named in capitals."""
    for param in command.params:
        if isinstance(param, typer.core.TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # typer would show "<bool>" as if the flag took a value
        elif isinstance(param, typer.core.TyperArgument) and param.metavar is None and param.name:
            param.metavar = param.name.upper()


def _help_flag(option: Any) -> Any:
    if option is not None and option.metavar is None:
        option.metavar = ""
    return option


class ToolproofCommand(typer.core.TyperCommand):
    """A command whose help shows flags as flags and arguments as ``NAME``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _polish_params(self)

    def get_help_option(self, ctx: Any) -> Any:
        """``--help``, shown as a flag."""
        return _help_flag(super().get_help_option(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] RUN`` rather than ``[OPTIONS] {run}``."""
        return _plain_usage(self, ctx)


class ToolproofGroup(typer.core.TyperGroup):
    """A command group with toolproof's help style and its one top-level error handler."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _polish_params(self)

    def get_help_option(self, ctx: Any) -> Any:
        """``--help``, shown as a flag."""
        return _help_flag(super().get_help_option(ctx))

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; map every error to its one line and exit code.

        Click usage errors exit :data:`USAGE_EXIT_CODE` (1); toolproof errors print
        ``error: <message>`` and exit with :func:`toolproof.errors.error_mapping`'s code.
        With ``standalone_mode=False`` errors propagate unchanged (click's contract).
        """
        _one_line_sdk_logs()
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # the public base of click's own errors
            from typer import rich_utils

            error: Any = exc  # click's ClickException, reached through typer's public base
            rich_utils.rich_format_error(error)
            sys.exit(USAGE_EXIT_CODE)
        except typer.Abort:
            err_console.print("Aborted!")
            sys.exit(USAGE_EXIT_CODE)
        except (ToolproofError, UsageError) as exc:
            sys.exit(report_error(exc))
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="toolproof",
    cls=ToolproofGroup,
    help="Agent tools that can be trusted: validated tools, named variants, evidence-chained runs.",
    epilog=docs_epilog("runs.md"),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
    "toolproof.adapters.cli.call",
    "toolproof.adapters.cli.extensions",
    "toolproof.adapters.cli.corpus",
    "toolproof.adapters.cli.serve",
    "toolproof.adapters.cli.runs",
    "toolproof.adapters.cli.worker",
    "toolproof.adapters.cli.attest",
    "toolproof.adapters.cli.lock",
    "toolproof.adapters.cli.view",
    "toolproof.adapters.cli.approvals",
    "toolproof.adapters.cli.sessions",
    "toolproof.adapters.cli.mcp",
)
"""Modules that each define ``register(app)``; one per command group, added as they land."""


def _register() -> None:
    import importlib

    for module in _COMMAND_MODULES:
        importlib.import_module(module).register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``toolproof`` console script."""
    app(args=argv, prog_name="toolproof")
