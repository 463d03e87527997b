"""[[mcp]] and [[python]] include/exclude filters: what binds, the descriptor, the warnings."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest
from mcp_support import ROOT
from test_lock import _append, config  # noqa: F401 - the fixture (a real MCP server)

from toolproof import load_toolset
from toolproof.tools.toolset import Toolset

EXAMPLE = ROOT / "examples" / "tool-evidence"


def _load(path: Path) -> Toolset:
    async def go() -> Toolset:
        async with load_toolset(path) as toolset:
            return toolset

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("keys", "bound"),
    [
        ('include = ["read_*"]\n', ["fs_read_file"]),
        ('exclude = ["*delete*"]\n', ["fs_read_file"]),
        ('include = ["*_file"]\nexclude = ["read*"]\n', ["fs_delete_file"]),
    ],
)
def test_mcp_filters_choose_the_server_tools(
    config: Path,  # noqa: F811 - the fixture
    keys: str,
    bound: list[str],
) -> None:
    _append(config, keys)
    assert _load(config).names() == bound


def test_filters_enter_the_descriptor_and_a_glob_matching_nothing_warns(
    config: Path,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    plain = _load(config).descriptor()
    _append(config, 'exclude = ["write_*"]\n')
    with caplog.at_level(logging.WARNING, logger="toolproof.config"):
        filtered = _load(config).descriptor()
    assert [tool.name for tool in filtered.tools] == [tool.name for tool in plain.tools]
    assert filtered.filters == [{"source": "mcp:fs", "include": None, "exclude": ["write_*"]}]
    assert filtered.id != plain.id  # changing a filter changes run ids
    assert "filters" not in plain.to_json()
    assert [record.getMessage() for record in caplog.records] == [
        "tool filter of mcp:fs: exclude = 'write_*' matches none of its tools "
        "(read_file, delete_file)"
    ]


def test_python_filters(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "evidence_tools.py", tmp_path / "evidence_tools.py")
    toml = tmp_path / "toolproof.toml"
    toml.write_text('[[python]]\nmodule = "evidence_tools"\nexclude = ["st*"]\n', encoding="utf-8")
    toolset = _load(toml)
    assert "stock" not in toolset.names() and toolset.names()
    assert toolset.descriptor().filters == [
        {"source": "python:evidence_tools", "include": None, "exclude": ["st*"]}
    ]
    toml.write_text(
        '[[python]]\nmodule = "evidence_tools"\ninclude = ["stock"]\n', encoding="utf-8"
    )
    assert _load(toml).names() == ["stock"]
