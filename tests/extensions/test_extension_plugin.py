"""A wrapper from a separate, pip-built package, found through the entry point."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolproof import load_toolset
from toolproof.extensions import ENTRY_POINT_GROUP, ExtensionRegistry

PLUGIN = Path(__file__).resolve().parent.parent / "plugins" / "sample_extension"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def installed(install_plugin: Callable[[str], None]) -> None:
    """The sample plugin, built into a temporary folder on the path (nothing installed)."""
    install_plugin("sample_extension")


def test_entry_point_is_declared(installed: None) -> None:
    [entry] = [
        ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == "shout"
    ]
    assert entry.value == "toolproof_sample_extension:shout"


def test_registry_loads_the_plugin(installed: None) -> None:
    registry = ExtensionRegistry()
    assert registry.load_entry_points() == ()
    shout = registry["shout"]
    assert (str(shout.kind), shout.version, shout.origin) == (
        "wrapper",
        "1",
        "toolproof_sample_extension",
    )


def test_plugin_wrapper_works_from_toolproof_toml(installed: None, tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "ext_fixture_tools"\npath = "{HERE.as_posix()}"\n\n'
        '[tools.write_note]\nextensions = ["shout"]\n',
        encoding="utf-8",
    )

    async def go() -> object:
        async with load_toolset(config) as toolset:
            assert [layer.name for layer in toolset["write_note_shout"].stack] == ["shout"]
            return (await toolset["write_note_shout"].call({"text": "hello"})).value

    assert asyncio.run(go()) == "HELLO"
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolproof.adapters.cli import main; main()",
            "tools",
            "list",
            "--config",
            str(config),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listing.returncode == 0, listing.stderr
    tools = {tool["name"]: tool for tool in json.loads(listing.stdout)["tools"]}
    assert tools["write_note_shout"]["stack"][0]["name"] == "shout"
