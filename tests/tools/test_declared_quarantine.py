"""Declared tools end to end: a real MCP server's bad declarations are quarantined, the rest bind.

The server (``tests/fixtures/declared_server.py``, raw JSON-RPC over stdio) lists two
good tools and four bad ones; ``toolproof tools list`` shows exactly which were
quarantined and why, and a bound tool's body gets exactly the caller's arguments.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolproof import load_toolset
from toolproof.adapters.cli.app import app, out_console

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "declared_server.py"


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[mcp]]\nname = "decl"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(SERVER))}]\n",
        encoding="utf-8",
    )
    return path


def test_cli_lists_quarantined_declarations_with_field_and_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(out_console, "width", 250)
    path = _config(tmp_path)
    result = CliRunner().invoke(app, ["tools", "list", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [tool["name"] for tool in document["tools"]] == ["decl_hard", "decl_tree"]
    quarantined = {item["name"]: item for item in document["quarantined"]}
    assert sorted(quarantined) == ["decl_bomb", "decl_dangling", "decl_remote", "decl_typo"]
    assert quarantined["decl_remote"]["field"] == "input_schema.properties.a.$ref"
    assert quarantined["decl_remote"]["rule"].startswith("remote $ref 'https://x.test/a'")
    assert quarantined["decl_typo"]["field"] == "input_schema.properties.count.type"
    assert quarantined["decl_bomb"]["field"] == "input_schema.properties.v.$ref"
    assert quarantined["decl_bomb"]["rule"].startswith(
        "reference expansion exceeds the limit of 10000 subschemas"
    )
    assert quarantined["decl_dangling"]["rule"].startswith("$ref '#/$defs/Missing' does not")
    table = CliRunner().invoke(app, ["tools", "list", "--config", str(path)])
    assert "quarantined" in table.stdout
    assert "decl_bomb" in table.stdout


def test_bound_declared_tool_delivers_exactly_the_callers_arguments(tmp_path: Path) -> None:
    async def run() -> list[object]:
        async with load_toolset(_config(tmp_path)) as toolset:
            hard = toolset["decl_hard"]
            sent = {"from": "x", "_private": None, "model_config": {"k": [1]}}
            echoed = (await hard.call(sent)).unwrap()
            refused = await hard.call({"from": 5})
            tree = await toolset["decl_tree"].call({"root": {"kids": [{"kids": []}]}})
            return [echoed, refused.failure.kind if refused.failure else None, tree.ok]

    echoed, refused_kind, tree_ok = asyncio.run(run())
    assert json.loads(str(echoed)) == {"from": "x", "_private": None, "model_config": {"k": [1]}}
    assert refused_kind == "invalid_arguments"
    assert tree_ok
