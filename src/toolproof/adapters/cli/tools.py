"""``toolproof tools list|show|lint``: what a composition root binds, and its lint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    ToolproofGroup,
    docs_epilog,
    emit_json,
    err_console,
    exit_for,
    out_console,
    run_async,
)
from toolproof.adapters.cli.lint import lint_tools
from toolproof.adapters.cli.options import ConfigOption, JsonOption
from toolproof.errors import ConfigError, InputError
from toolproof.identity import canonical_json

if TYPE_CHECKING:
    from toolproof.tools.tool import Tool
    from toolproof.tools.toolset import Toolset

__all__ = ["layer_chain", "print_quarantine", "quarantine_table", "register", "tools_app"]

tools_app = typer.Typer(
    cls=ToolproofGroup,
    help="List and inspect the tools a toolproof.toml binds.",
    epilog=docs_epilog("tools.md"),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``tools`` command group to ``app``."""
    app.add_typer(tools_app, name="tools")


tools_app.command("lint", cls=ToolproofCommand, epilog=docs_epilog("lint.md"))(lint_tools)


def _stack_text(tool_json: dict[str, Any]) -> str:
    stack = tool_json.get("stack") or []
    return " > ".join(f"{layer['name']}({layer['kind']})" for layer in stack) or "-"


def _listing(toolset: Toolset) -> dict[str, Any]:
    tools = []
    for tool in toolset:
        descriptor = tool.descriptor()
        entry: dict[str, Any] = {
            "name": tool.name,
            "version": tool.spec.version,
            "description": tool.spec.description,
            "owner": toolset.owner(tool.name),
            "base": descriptor.base,
            "stack": [layer.to_json() for layer in descriptor.stack],
            "fingerprint": descriptor.fingerprint,
            "annotations": tool.spec.annotations.model_dump(
                mode="json", exclude_none=True, exclude={"schema_version"}
            ),
        }
        if tool.spec.idempotency is not None:  # the body honours the call's key
            entry["idempotency"] = tool.spec.idempotency
        tools.append(entry)
    listing: dict[str, Any] = {
        "tools": tools,
        "quarantined": [item.to_json() for item in toolset.quarantined],
        "descriptor_digest": toolset.descriptor().digest,
    }
    hidden = toolset.hidden()
    if hidden:  # what serve, sessions and run specs do not expose (docs/approvals.md)
        listing["hidden"] = [{"name": name, "reason": why} for name, why in hidden.items()]
    return listing


@tools_app.command("list", cls=ToolproofCommand, epilog=docs_epilog("tools.md"))
def list_tools(
    config: Path = ConfigOption,
    as_json: bool = JsonOption,
    strict: bool = typer.Option(
        False, "--strict", help="Exit 1 when anything was quarantined (default: exit 0)."
    ),
) -> None:
    """List every tool and variant, every quarantined item, and what the faces hide, with why."""

    async def load() -> dict[str, Any]:
        from toolproof.config import load_toolset

        async with load_toolset(config) as toolset:
            return _listing(toolset)

    listing = run_async(load())
    if as_json:
        emit_json(listing)
    else:
        _print_listing(config, listing)
    if strict and listing["quarantined"]:
        raise exit_for(ConfigError)


def _print_listing(config: Path, listing: dict[str, Any]) -> None:
    from toolproof.tools.lint import escape_invisible

    table = Table(title=Text(f"tools in {config}"), show_lines=False)
    for column in ("name", "stack", "owner", "description"):
        table.add_column(column, overflow="fold")
    for item in listing["tools"]:
        first_line = (item["description"] or "").strip().splitlines()[:1]
        cells = (
            item["name"],
            _stack_text(item),
            item["owner"],
            escape_invisible(first_line[0]) if first_line else "",
        )
        table.add_row(*(Text(cell) for cell in cells))  # Text: user text is never markup
    out_console.print(table)
    if listing["quarantined"]:
        out_console.print(quarantine_table(listing["quarantined"]))
    if listing.get("hidden"):
        hidden = Table(title="hidden from serve, sessions and run specs")
        for column in ("name", "reason"):
            hidden.add_column(column, overflow="fold")
        for item in listing["hidden"]:
            hidden.add_row(Text(item["name"]), Text(item["reason"]))
        out_console.print(hidden)
    out_console.print(f"descriptor {listing['descriptor_digest']}")


def quarantine_table(items: list[dict[str, Any]]) -> Table:
    """The table of quarantined items (``Quarantined.to_json()`` each): name, field, rule, owner."""
    quarantine = Table(title="quarantined")
    for column in ("name", "field", "rule", "owner"):
        quarantine.add_column(column, overflow="fold")
    for item in items:
        cells = (item["name"], item["field"], item["rule"], item["owner"])
        quarantine.add_row(*(Text(cell) for cell in cells))  # Text: user text is never markup
    return quarantine


def print_quarantine(toolset: Toolset) -> None:
    """Print ``toolset``'s quarantine table on stderr, when anything is quarantined.

    What ``serve``, ``run`` and ``call`` show before they start, so a tool or variant
    that did not bind is named with its rule rather than found missing later.
    """
    if toolset.quarantined:
        items = [item.to_json() for item in toolset.quarantined]
        err_console.print(quarantine_table(items))
        err_console.print(
            f"toolproof: {len(items)} quarantined, not bound "
            "(`toolproof tools list --strict` exits 1 on this)",
            markup=False,
        )


def layer_chain(tool: Tool) -> list[dict[str, Any]]:
    """The layers of ``tool``, outermost first, down to its base tool (the last item).

    Each item is ``{"tool", "extension", "kind", "version", "config"}``: the tool (or
    variant) name, and for a variant the extension that built it from the next item,
    with its kind, version and validated config (JSON; ``{}`` for an extension without
    config); the base tool has ``None`` for those four.
    """
    chain: list[dict[str, Any]] = []
    for layer in tool.layers():
        top = layer.stack[-1] if layer.inner is not None and layer.stack else None
        chain.append(
            {
                "tool": layer.name,
                "extension": None if top is None else top.name,
                "kind": None if top is None else top.kind,
                "version": None if top is None else top.version,
                "config": None if top is None else layer.config,
            }
        )
    return chain


def _layer_line(layer: dict[str, Any]) -> str:
    if layer["extension"] is None:
        return f"  {layer['tool']}  (base)"
    config = canonical_json(layer["config"]).decode()
    return f"  {layer['tool']}  {layer['extension']} ({layer['kind']}) {config}"


@tools_app.command("show", cls=ToolproofCommand, epilog=docs_epilog("tools.md"))
def show_tool(
    name: str = typer.Argument(..., help="The tool or variant name."),
    config: Path = ConfigOption,
    as_json: bool = JsonOption,
) -> None:
    """Show one tool's spec (schemas, annotations), descriptor and layer chain."""

    async def load() -> dict[str, Any] | None:
        from toolproof.config import load_toolset

        async with load_toolset(config) as toolset:
            tool = toolset.get(name)
            if tool is None:
                return None
            return {
                "spec": tool.spec.to_json(),
                "descriptor": tool.descriptor().to_json(),
                "owner": toolset.owner(name),
                "layers": layer_chain(tool),
            }

    shown = run_async(load())
    if shown is None:
        raise InputError(f"no tool named {name!r} in {config}", tool=name, rule="not found")
    if as_json:
        emit_json(shown)
        return
    spec = shown["spec"]
    out_console.print(
        f"[bold]{escape(spec['name'])}[/] (version {escape(spec['version'])}, "
        f"from {escape(shown['owner'])})"
    )
    if spec["description"]:
        out_console.print(Text(spec["description"]))
    out_console.print("[bold]input schema[/]")
    out_console.print_json(json.dumps(spec["input_schema"]))
    if spec["output_schema"] is not None:
        out_console.print("[bold]output schema[/]")
        out_console.print_json(json.dumps(spec["output_schema"]))
    out_console.print(f"fingerprint {shown['descriptor']['fingerprint']}")
    out_console.print("[bold]layers[/] (outermost first, down to the base tool)")
    for layer in shown["layers"]:
        out_console.print(Text(_layer_line(layer)))  # Text: names and config are never markup
