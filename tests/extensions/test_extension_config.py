"""``toolproof.toml`` extensions: normalization errors, binding, quarantine, the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolproof import ConfigError, load_toolset
from toolproof.adapters.cli.app import app, out_console
from toolproof.extensions import ComboElement, normalize_combos

HERE = Path(__file__).resolve().parent
SHAPE = (
    'give one combo, like ["retry", "cache"], or a list of combos, like '
    '[["retry"], ["retry", "cache"]]'
)


def test_one_combo_and_several_combos() -> None:
    assert normalize_combos("f.toml", "t", ["retry", {"name": "cache", "config": {"ttl": 1}}]) == [
        (ComboElement("retry"), ComboElement("cache", {"ttl": 1}))
    ]
    assert normalize_combos("f.toml", "t", [["retry"], ["retry", {"name": "cache"}]]) == [
        (ComboElement("retry"),),
        (ComboElement("retry"), ComboElement("cache")),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("retry", f"f.toml: tools.t.extensions: must be a list (rule: {SHAPE})"),
        ([], f"f.toml: tools.t.extensions: is empty (rule: {SHAPE})"),
        (
            [["retry"], []],
            "f.toml: tools.t.extensions[1]: combo is empty "
            "(rule: a combo names at least one extension)",
        ),
        (
            ["retry", ["cache"]],
            f"f.toml: tools.t.extensions: mixes extensions and combos (rule: {SHAPE}, not both)",
        ),
        (
            [{"name": "retry", "confg": {}}],
            "f.toml: tools.t.extensions[0]: unknown key 'confg' (allowed: name, config)",
        ),
        (
            [["retry", {"config": {}}]],
            "f.toml: tools.t.extensions[0][1]: needs a non-empty 'name' string",
        ),
        (
            [{"name": "retry", "config": [1]}],
            "f.toml: tools.t.extensions[0].config: config must be a table, not list",
        ),
        (
            [3],
            "f.toml: tools.t.extensions[0]: must be an extension name or a table "
            "{name = ..., config = {...}}, not int",
        ),
        ([""], "f.toml: tools.t.extensions[0]: extension name is empty"),
    ],
    ids=[
        "not-list",
        "empty",
        "empty-combo",
        "mixed",
        "extra-key",
        "no-name",
        "config-not-table",
        "number",
        "empty-name",
    ],
)
def test_normalization_errors(value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        normalize_combos("f.toml", "t", value)
    assert str(info.value) == message
    assert info.value.fields["file"] == "f.toml"


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[python]]\nmodule = "ext_fixture_tools"\npath = "{HERE.as_posix()}"\n\n{body}',
        encoding="utf-8",
    )
    return path


async def listing(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    async with load_toolset(path) as toolset:
        return toolset.names(), [item.to_json() for item in toolset.quarantined]


CONFIG = """
[extensions]
modules = ["ext_fixture_exts", "ext_fixture_broken"]

[tools.add]
extensions = [
    ["retry", "fixture_double"],
    ["retry", {name = "cache", config = {ttl = 60}}],
    ["nope"],
]

[tools.my-tool]
extensions = ["cache"]

[tools.write_note]
extensions = [
    ["retry"],
    [{name = "retry", config = {force = true}}, "audit"],
    [{name = "timeout", config = {seconds = 1}}],
]

[tools.spread]
extensions = ["cache"]
"""


def test_load_toolset_binds_variants_and_quarantines_the_rest(tmp_path: Path) -> None:
    path = write_config(tmp_path, CONFIG)
    names, quarantined = asyncio.run(listing(path))
    assert names == [
        "add",
        "add_retry",
        "add_retry_cache",
        "add_retry_fixture_double",
        "my-tool",
        "my-tool_cache",
        "write_note",
        "write_note_timeout",
    ]
    by_name = {item["name"]: item for item in quarantined}
    assert by_name["ext_fixture_broken"] == {
        "name": "ext_fixture_broken",
        "field": "extensions.modules[1]",
        "rule": "cannot import extension module 'ext_fixture_broken': ImportError: fixture "
        "module is broken on purpose",
        "owner": "extensions",
    }
    assert by_name["add_nope"]["field"] == "tools.add.extensions[2][0]"
    assert by_name["write_note_retry"]["rule"] == (
        "cannot apply combo [retry] to tool 'write_note': 'retry' refused on tool 'write_note': "
        "it is marked neither read-only nor idempotent, nor does it honour the idempotency key "
        '(rule: mark the tool read_only, idempotent or idempotency = "key": '
        "@toolproof.tool(read_only=True), @toolproof.tool(idempotent=True) or "
        '@toolproof.tool(idempotency="key") on a Python function; readOnlyHint or idempotentHint '
        'on a declared or MCP tool, or idempotency = "key" in its [tools.NAME] table; or set '
        "config force = true)"
    )
    assert by_name["write_note_retry_audit"]["rule"] == (
        "cannot apply combo [retry, audit] to tool 'write_note': variant name "
        "'write_note_retry' is minted twice with different configs (rule: one name, one variant)"
    )  # combo [0] was refused as write_note_retry with the default config: one name, one variant
    assert by_name["write_note_retry_audit"]["field"] == "tools.write_note.extensions[1][0]"
    assert by_name["spread_cache"]["rule"].startswith("base tool 'spread' is quarantined: ")
    assert [item["name"] for item in quarantined] == [
        "spread",
        "ext_fixture_broken",
        "add_nope",
        "write_note_retry",
        "write_note_retry_audit",
        "spread_cache",
    ]


def test_variants_call_through_the_loaded_toolset(tmp_path: Path) -> None:
    path = write_config(tmp_path, CONFIG)

    async def go() -> list[Any]:
        async with load_toolset(path) as toolset:
            return [
                (await toolset["add_retry_fixture_double"].call({"a": 2})).value,
                (await toolset["my-tool_cache"].call({"x": 4})).value,
            ]

    assert asyncio.run(go()) == [6, 8]


def test_unknown_tool_is_a_config_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[tools.ghost]\nextensions = ["retry"]\n')
    with pytest.raises(ConfigError) as info:
        asyncio.run(listing(path))
    assert info.value.fields["key"] == "tools.ghost"
    assert info.value.fields["rule"] == (
        "no tool named 'ghost' is bound (known: add, my-tool, write_note)"
    )


def test_malformed_extensions_name_the_file_and_tool(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[tools.add]\nextensions = []\n")
    with pytest.raises(ConfigError) as info:
        asyncio.run(listing(path))
    assert str(info.value) == f"{path}: tools.add.extensions: is empty (rule: {SHAPE})"


def test_cli_tools_list_shows_stacks_and_quarantine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(out_console, "width", 200)
    path = write_config(tmp_path, CONFIG)
    result = CliRunner().invoke(app, ["tools", "list", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    tools = {tool["name"]: tool for tool in document["tools"]}
    assert tools["add_retry_cache"]["base"] == "add"
    assert [(layer["name"], layer["kind"]) for layer in tools["add_retry_cache"]["stack"]] == [
        ("retry", "wrapper"),
        ("cache", "wrapper"),
    ]
    assert "add_nope" in {item["name"] for item in document["quarantined"]}
    table = CliRunner().invoke(app, ["tools", "list", "--config", str(path)])
    assert "retry(wrapper) > cache(wrapper)" in table.stdout
    assert "ext_fixture_broken" in table.stdout


def test_cli_extensions_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(out_console, "width", 200)
    path = write_config(tmp_path, CONFIG)
    result = CliRunner().invoke(app, ["extensions", "list", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    by_name = {ext["name"]: ext for ext in document["extensions"]}
    assert by_name["timeout"]["reserved_params"]["timeout_s"]["exclusiveMinimum"] == 0
    assert by_name["fixture_double"]["origin"] == "ext_fixture_exts"
    assert by_name["retry"]["kind"] == "wrapper"
    assert "ext_fixture_broken" in {item["name"] for item in document["quarantined"]}
    table = CliRunner().invoke(app, ["extensions", "list"])
    assert table.exit_code == 0
    assert "rate_limit" in table.stdout
