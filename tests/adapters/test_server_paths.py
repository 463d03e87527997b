"""What ``serve`` and the runs API answer a client names no absolute server path."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client

from toolproof import Tool, Toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.adapters.server_paths import ServerPaths


def test_known_locations_become_labels_at_path_boundaries_only() -> None:
    paths = ServerPaths([("/srv/runs", "<root>")])
    home = Path.home()
    text = (
        "no approval request 'a' in /srv/runs/approvals.db; config "
        f"{Path.cwd() / 'toolproof.toml'}, cache {home / '.cache'}; "
        "pointer /options/force; sibling /srv/runsX/y; "
        f"venv {Path(sys.prefix) / 'lib'}"
    )
    assert paths.hide(text) == (
        "no approval request 'a' in <root>/approvals.db; config <cwd>/toolproof.toml, "
        "cache ~/.cache; pointer /options/force; sibling /srv/runsX/y; venv <python>/lib"
    )
    assert paths.hide("argument '/a/b': 3 is not a string") == (
        "argument '/a/b': 3 is not a string"
    )


def test_a_served_failure_names_the_location_label_not_the_path(tmp_path: Path) -> None:
    missing = Path(tempfile.gettempdir()) / "toolproof-absent" / "data.csv"

    def read(name: str) -> str:
        """Read a data file."""
        return missing.read_text(encoding="utf-8")

    async def scenario() -> Any:
        toolset = Toolset()
        toolset.add(Tool.from_function(read))
        toolset.seal()
        async with Client(build_server(toolset)) as client:
            return await client.call_tool("read", {"name": "x"})

    result = asyncio.run(scenario())
    assert result.is_error is True
    assert result.content[0].text == (
        "tool_error: tool 'read' raised FileNotFoundError: [Errno 2] No such file or "
        "directory: '<tmp>/toolproof-absent/data.csv'"
    )
    failure = (result.meta or {})["toolproof/failure"]
    assert str(missing) not in failure["message"]
