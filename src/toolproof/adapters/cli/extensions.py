"""``toolproof extensions list``: every registered extension and every load failure."""

from __future__ import annotations

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
    run_async,
)
from toolproof.adapters.cli.options import JsonOption

if TYPE_CHECKING:
    from toolproof.extensions.registry import ExtensionRegistry

__all__ = ["extensions_app", "register"]

extensions_app = typer.Typer(
    cls=ToolproofGroup,
    epilog=docs_epilog("extensions.md"),
    help="List the extensions (wrappers, transformers, backends) tools can use.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``extensions`` command group to ``app``."""
    app.add_typer(extensions_app, name="extensions")


def _listing(config: Path | None) -> dict[str, Any]:
    from toolproof.config import extension_registry

    failures: list[dict[str, str]] = []
    registry = extension_registry()
    if config is not None:

        async def load() -> tuple[list[dict[str, str]], ExtensionRegistry]:
            from toolproof.config import EXTENSIONS, load_toolset

            async with load_toolset(config) as toolset:
                quarantined = [
                    item.to_json() for item in toolset.quarantined if item.owner == "extensions"
                ]
                return quarantined, toolset.resources[EXTENSIONS]

        failures, registry = run_async(load())
    for failure in registry.load_entry_points():
        record = {"name": failure.name, "field": failure.field, "rule": failure.rule}
        if not any(item["name"] == failure.name for item in failures):
            failures.append({**record, "owner": "extensions"})
    return {"extensions": [ext.to_json() for ext in registry], "quarantined": failures}


@extensions_app.command("list", cls=ToolproofCommand, epilog=docs_epilog("extensions.md"))
def list_extensions(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Also load this toolproof.toml's \\[extensions] modules (and show its quarantine).",
    ),
    as_json: bool = JsonOption,
) -> None:
    """List every registered extension: built-ins, entry points and config modules."""
    listing = _listing(config)
    if as_json:
        emit_json(listing)
        return
    table = Table(title="extensions", expand=False)
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("about", ratio=1, overflow="fold")
    for ext in listing["extensions"]:
        notes = [f"version {ext['version']}", f"from {ext['origin']}"]
        if ext["reserved_params"]:
            notes.append("reserved params: " + ", ".join(ext["reserved_params"]))
        if ext["requires_body_locality"]:
            notes.append("requires body locality")
        about = Text(ext["description"] or "")
        about.append("\n" + "; ".join(notes), style="dim")
        table.add_row(ext["name"], ext["kind"], about)
    out_console.print(table)
    if listing["quarantined"]:
        quarantine = Table(title="quarantined")
        for column in ("name", "field", "rule"):
            quarantine.add_column(column, overflow="fold")
        for item in listing["quarantined"]:
            quarantine.add_row(item["name"], item["field"], item["rule"])
        out_console.print(quarantine)
