"""``toolproof lock``: pin the tool inventory of a composition root in ``toolproof.lock``.

``lock --config FILE`` writes the lock (refusing to replace one that differs),
``lock --check`` exits 0 when nothing drifted and 2 when something did (printing the
diffs), ``lock --update`` accepts the current tools and prints what it accepted.
Exit 1: the config or the lock cannot be read. See ``docs/lock.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError
from rich.markup import escape

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    docs_epilog,
    emit_json,
    exit_for,
    out_console,
    run_async,
)
from toolproof.adapters.cli.options import ConfigOption, JsonOption
from toolproof.errors import InputError, VerificationError

if TYPE_CHECKING:
    from toolproof.tools.lock import Drift, Lockfile

__all__ = ["print_drifts", "register", "run_lock"]


def run_lock(directory: Path) -> str | None:
    """The lock digest the run in ``directory`` recorded (``runtime.json``), or ``None``."""
    from toolproof.contract.layout import RUNTIME_FILE
    from toolproof.contract.runs import ExecutionRuntime

    try:
        runtime = ExecutionRuntime.model_validate_json((directory / RUNTIME_FILE).read_bytes())
    except (OSError, ValidationError, InputError):
        return None
    return runtime.toolset.lock


def print_drifts(drifts: list[Drift]) -> None:
    """Print each drift and its field-level diff, for people.

    Invisible and direction-changing characters in a value are printed escaped
    (:func:`~toolproof.tools.lint.escape_invisible`), so a description that gained a
    U+202E shows it instead of rendering it.
    """
    from toolproof.tools.lint import escape_invisible

    for drift in drifts:
        out_console.print(f"[bold]{escape(drift.name)}[/] {drift.kind}")
        for change in drift.changes:
            out_console.print(f"  {escape(escape_invisible(str(change)))}")


async def _current(config: Path) -> tuple[Lockfile, Path]:
    from toolproof.config import CONFIG, ToolproofConfig, load_toolset, lock_path_of
    from toolproof.tools.lock import build_lock

    async with load_toolset(config, lock=False) as toolset:
        parsed: ToolproofConfig = toolset.resources[CONFIG]
        return build_lock(toolset), lock_path_of(config, parsed)


def _lock(
    config: Path = ConfigOption,
    check: bool = typer.Option(False, "--check", help="Exit 2 when a tool drifted from the lock."),
    update: bool = typer.Option(False, "--update", help="Accept the current tools into the lock."),
    as_json: bool = JsonOption,
) -> None:
    """Write toolproof.lock: every tool's source, spec digest and fingerprint."""
    from toolproof.tools.lock import diff_locks, read_lock, write_lock

    if check and update:
        raise InputError("--check and --update exclude each other")
    current, path = run_async(_current(config))
    exists = path.is_file()
    if check and not exists:
        raise InputError(f"no lock at {path}: write one with toolproof lock", path=str(path))
    old = read_lock(path) if exists else None
    drifts = diff_locks(old, current) if old is not None else []
    written = False
    if not check and (old is None or update):
        write_lock(path, current)
        written = True
    refused = bool(drifts) and not update
    document: dict[str, Any] = {
        "lock": str(path),
        "digest": current.digest if written or not drifts else old.digest if old else None,
        "written": written,
        "drift": [drift.to_json() for drift in drifts],
    }
    if as_json:
        emit_json(document)
    else:
        print_drifts(drifts)
        if written and update and drifts:
            out_console.print(f"accepted {len(drifts)} changes into {path}")
        if written:
            out_console.print(f"wrote {path} ({len(current.tools)} tools), lock {current.digest}")
        elif not drifts:
            out_console.print(f"{path} is up to date, lock {current.digest}")
        elif check:
            out_console.print(f"{len(drifts)} tools drifted from {path}")
        else:
            out_console.print(
                f"{len(drifts)} tools differ from {path}: review, then toolproof lock --update"
            )
    if refused:
        raise exit_for(VerificationError)


def register(app: typer.Typer) -> None:
    """Add ``lock`` to ``app``."""
    app.command("lock", cls=ToolproofCommand, epilog=docs_epilog("lock.md"))(_lock)
