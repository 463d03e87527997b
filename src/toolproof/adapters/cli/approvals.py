"""``toolproof approvals list|show|approve|deny``: a person decides on pending requests.

The CLI channel of the ``approve`` wrapper (docs/approvals.md): it reads and writes
the approvals store (SQLite) that a waiting ``serve``, session or run shares. Who
decided is the OS user running the command. A decision approves the exact
arguments of the request (their digest), or, with ``--edit``, the given arguments
instead (validated against the tool's schema when the call resumes).
"""

from __future__ import annotations

import getpass
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from toolproof.adapters.cli.options import JsonOption
from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest_json

if TYPE_CHECKING:
    from toolproof.extensions.approvals.store import ApprovalStore, StoredRequest

__all__ = ["approvals_app", "os_user", "register"]

_DOC = docs_epilog("approvals.md")

approvals_app = typer.Typer(
    cls=ToolproofGroup,
    help="List, inspect, approve or deny the approval requests of an approvals store.",
    epilog=_DOC,
    no_args_is_help=True,
)

StoreOption = typer.Option(
    ..., "--store", help="The approvals store (\\[approvals] store, a SQLite file)."
)
IdArgument = typer.Argument(..., help="The request id (apr_...), as 'approvals list' shows it.")
ReasonOption = typer.Option("", "--reason", help="Why: recorded with the decision.")


def register(app: typer.Typer) -> None:
    """Add the ``approvals`` command group to ``app``."""
    app.add_typer(approvals_app, name="approvals")


def os_user() -> str:
    """The OS user running the command (who a CLI decision is recorded as)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER: the numeric uid
        return f"uid:{os.getuid()}"


def _store(path: Path) -> ApprovalStore:
    from toolproof.extensions.approvals.store import ApprovalStore

    if not path.is_file():
        raise InputError(
            f"--store {str(path)!r}: no approvals store there (rule: name the [approvals] "
            "store file of the toolproof.toml; it is created by the first gated call)",
            path=str(path),
            rule="existing store",
        )
    return ApprovalStore(path)


def _row_text(row: StoredRequest) -> list[str]:
    lines = [
        f"request   {row.id}",
        f"status    {row.status}",
        f"tool      {row.tool}",
        f"arguments {canonical_json(row.arguments).decode('utf-8')}",
        f"digest    {row.arguments_digest}",
        f"call      {row.call_id or '-'}",
        f"rule      {canonical_json(row.rule).decode('utf-8') if row.rule else 'every call'}",
        f"asked     {row.created_at} (deadline {row.to_json()['deadline']})",
    ]
    if row.decision is not None:
        lines.append(f"decision  {row.decision} by {row.who} ({row.channel}) at {row.decided_at}")
        if row.reason:
            lines.append(f"reason    {row.reason}")
        if row.approved_arguments is not None:
            edited = canonical_json(row.approved_arguments).decode("utf-8")
            lines.append(f"edited    {edited}")
    return lines


@approvals_app.command("list", cls=ToolproofCommand, epilog=_DOC)
def list_requests(
    store: Path = StoreOption,
    every: bool = typer.Option(False, "--all", help="Every request, not only pending ones."),
    as_json: bool = JsonOption,
) -> None:
    """List the pending requests (oldest first), or every request with --all."""
    rows = _store(store).list(status=None if every else "pending")
    if as_json:
        emit_json({"store": str(store), "requests": [row.to_json() for row in rows]})
        return
    table = Table(title=Text(f"approval requests in {store}"))
    for column in ("id", "status", "tool", "arguments", "asked"):
        table.add_column(column, overflow="fold")
    for row in rows:
        arguments = canonical_json(row.arguments).decode("utf-8")
        cells = (row.id, row.status, row.tool, arguments, row.created_at)
        table.add_row(*(Text(cell) for cell in cells))
    out_console.print(table)


@approvals_app.command("show", cls=ToolproofCommand, epilog=_DOC)
def show_request(
    request: str = IdArgument, store: Path = StoreOption, as_json: bool = JsonOption
) -> None:
    """Show one request: its tool, exact arguments, digest, rule and decision."""
    row = _store(store).require(request)
    if as_json:
        emit_json(row.to_json())
        return
    for line in _row_text(row):
        out_console.print(Text(line))


def _edited(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--edit: not JSON: {exc}", rule="JSON object") from None
    if type(value) is not dict:
        raise InputError(
            f"--edit: the arguments must be a JSON object, not {type(value).__name__}",
            rule="JSON object",
        )
    canonical_json(value)  # no canonical form (NaN...): InputError naming the path
    edited: dict[str, Any] = value
    return edited


def _decided(row: StoredRequest, as_json: bool) -> None:
    if as_json:
        emit_json(row.to_json())
        return
    out_console.print(Text(f"{row.id}: {row.decision} by {row.who}"))


@approvals_app.command("approve", cls=ToolproofCommand, epilog=_DOC)
def approve_request(
    request: str = IdArgument,
    store: Path = StoreOption,
    edit: str | None = typer.Option(
        None, "--edit", help="Approve these arguments (a JSON object) instead of the asked ones."
    ),
    reason: str = ReasonOption,
    as_json: bool = JsonOption,
) -> None:
    """Approve a pending request: its exact arguments, or the --edit ones."""
    approvals = _store(store)
    row = approvals.require(request)
    edited = _edited(edit)
    approved = row.arguments_digest if edited is None else digest_json(edited)
    decided = approvals.decide(
        request,
        approve=True,
        who=os_user(),
        channel="cli",
        reason=reason,
        approved_digest=approved,
        approved_arguments=edited,
    )
    _decided(decided, as_json)


@approvals_app.command("deny", cls=ToolproofCommand, epilog=_DOC)
def deny_request(
    request: str = IdArgument,
    store: Path = StoreOption,
    reason: str = ReasonOption,
    as_json: bool = JsonOption,
) -> None:
    """Deny a pending request: the call fails with approval_denied, its body never runs."""
    decided = _store(store).decide(
        request, approve=False, who=os_user(), channel="cli", reason=reason
    )
    _decided(decided, as_json)
