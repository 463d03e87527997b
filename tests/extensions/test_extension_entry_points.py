"""Entry points that cannot be loaded are reported (and quarantined), never fatal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from toolproof import Toolset
from toolproof.extensions import ExtensionRegistry, LoadFailure, configure_extensions

ENTRY_POINTS = """\
[toolproof.extensions]
ghost = toolproof_no_such_module:thing
number = json.decoder:NaN
"""


@pytest.fixture
def broken_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    dist = tmp_path / "toolproof_broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toolproof-broken-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_failing_entry_points_are_reported(broken_plugin: Path) -> None:
    registry = ExtensionRegistry()
    failures = {failure.name: failure for failure in registry.load_entry_points()}
    assert failures["ghost"] == LoadFailure(
        "ghost",
        "entry point toolproof.extensions:ghost "
        "(toolproof-broken-plugin:toolproof_no_such_module:thing)",
        "cannot load: ModuleNotFoundError: No module named 'toolproof_no_such_module'",
    )
    assert failures["number"].rule == (
        "cannot load: TypeError: entry point target is a float; expected an Extension, a module "
        "or a callable taking the registry"
    )
    assert registry.load_entry_points() == tuple(failures.values())  # loaded once
    assert "retry" in registry


def test_failing_entry_points_are_quarantined(broken_plugin: Path) -> None:
    toolset = Toolset()
    configure_extensions(
        toolset, file=broken_plugin / "toolproof.toml", registry=ExtensionRegistry()
    )
    quarantined = {item.name: item.to_json() for item in toolset.quarantined}
    assert quarantined["ghost"]["owner"] == "extensions"
    assert quarantined["ghost"]["rule"].startswith("cannot load: ModuleNotFoundError")
    asyncio.run(toolset.aclose())
