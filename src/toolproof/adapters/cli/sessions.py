"""``toolproof sessions list|reconcile``: unfinished sessions and their cut calls.

``list`` shows the live directories under ``ROOT/sessions`` (a session still recording,
or one a crash left: resume it with ``record_session(..., resume=True)``, or recover it
with ``toolproof verify --recover``) with their cut calls; one whose run was committed
before a kill kept it as ``committed RUN``, and a directory there that is no session
as ``not a session: REASON``. ``reconcile`` records what a
person found about one cut call, bound to its idempotency key, before the session
resumes (docs/durability.md).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    ToolproofGroup,
    docs_epilog,
    emit_json,
    out_console,
)
from toolproof.adapters.cli.approvals import os_user
from toolproof.adapters.cli.options import JsonOption, RootOption

__all__ = ["register", "sessions_app"]

_DOC = docs_epilog("durability.md")

sessions_app = typer.Typer(
    cls=ToolproofGroup,
    help="List unfinished sessions; reconcile a call a crash cut.",
    epilog=_DOC,
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``sessions`` command group to ``app``."""
    app.add_typer(sessions_app, name="sessions")


_LIST_HELP = (
    "List the unfinished sessions under ROOT/sessions, with their cut calls.\n\n"
    "A session whose run was committed before a kill kept its directory shows as "
    "'committed RUN'; a directory there that is not a session (no session.json, or one that "
    "is not a JSON object) shows as 'not a session: REASON' (not_sessions in --json)."
)
"""``sessions list --help``: plain text, a paragraph a line (Typer keeps a docstring's breaks)."""


@sessions_app.command("list", cls=ToolproofCommand, epilog=_DOC, help=_LIST_HELP)
def list_sessions(root: Path = RootOption, as_json: bool = JsonOption) -> None:
    """List the unfinished sessions under ROOT/sessions, with their cut calls.

    A session whose run was committed before a kill kept its directory shows as
    ``committed RUN``; a directory there that is not a session (no session.json, or
    one that is not a JSON object) shows as ``not a session: REASON`` (``not_sessions``
    in ``--json``).
    """
    from toolproof.runs.unfinished import not_sessions, unfinished_sessions

    found, strays = unfinished_sessions(root), not_sessions(root)
    if as_json:
        emit_json({"root": str(root), "sessions": found, "not_sessions": strays})
        return
    table = Table(title=Text(f"unfinished sessions under {root / 'sessions'}"))
    for column in ("session", "directory", "state", "started", "calls", "cut calls"):
        table.add_column(column, overflow="fold")
    rows: list[tuple[str, tuple[object, ...]]] = []
    for item in found:
        cut = ", ".join(
            f"{c['step']} {c['tool']}"
            + (" (reconciled)" if c["step"] in item["reconciled"] else "")
            for c in item["cut"]
        )
        state = item["state"]
        if item["committed"] is not None:
            state = f"committed {item['committed'][:16]}…"  # the whole id: --json
        cells = (item["session"], item["directory"], state, item["started_at"], item["calls"])
        rows.append((item["directory"], (*cells, cut or "-")))
    for stray in strays:
        state = f"not a session: {stray['reason']}"
        rows.append((stray["directory"], ("-", stray["directory"], state, "-", "-", "-")))
    for _, row in sorted(rows, key=lambda row: row[0]):
        table.add_row(*(Text(str(cell)) for cell in row))
    out_console.print(table)


@sessions_app.command("reconcile", cls=ToolproofCommand, epilog=_DOC)
def reconcile_call(
    session: str = typer.Argument(..., help="The session's id (its session_id)."),
    call: str = typer.Argument(..., help="The cut call's step (call-00000004) or its key."),
    outcome: Path = typer.Option(
        ..., "--outcome", help="A JSON file: what you found (did the call act?)."
    ),
    root: Path = RootOption,
    as_json: bool = JsonOption,
) -> None:
    """Record what a person found about a call a crash cut, before the session resumes."""
    from toolproof.runs.unfinished import reconcile

    stored = reconcile(root, session, call, outcome, os_user())
    if as_json:
        emit_json(stored)
        return
    out_console.print(
        Text(
            f"reconciled {stored['step']} ({stored['tool']}, key {stored['key']}) of session "
            f"{session}: outcome {stored['outcome_digest']} by {stored['who']}; resume the "
            "session to record it"
        )
    )
