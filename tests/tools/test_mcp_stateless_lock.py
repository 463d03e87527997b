"""The lock in the stateless era: a tools/list past its ttlMs is checked again (issue 33, 6).

A 2026-07-28 server sends no ``notifications/tools/list_changed`` unless a client listens
for them; it says instead how long its listing stays fresh (``ttlMs``, ``cacheScope``).
The server is ``tests/fixtures/mcp_lock_server.py`` in its stateless mode (a real stdio
process): its ``rename`` tool renames a tool and notifies no one. With ``ttlMs: 0`` the
next call of the server's tools lists again first, and the renamed tool is quarantined
as drift (kind ``renamed``, naming the new name); with a ``ttlMs`` of an hour the
listing is still fresh and nothing is listed again until the next load, where the lock
refuses the rename.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from toolproof import load_toolset
from toolproof.tools.lock import LOCK_FILE, build_lock, write_lock
from toolproof.tools.resources import MCP_LIVE, MCP_SERVERS

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_lock_server.py"
READ = {
    "name": "read_file",
    "description": "Read a text file.",
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
RENAME = {
    "name": "rename",
    "description": "Renames a tool.",
    "inputSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "to": {"type": "string"}},
    },
}


def config(tmp_path: Path, ttl_ms: int) -> Path:
    document = {
        "server": {"name": "locksrv", "version": "1.0.0"},
        "tools": [READ, RENAME],
        "stateless": {"ttlMs": ttl_ms, "cacheScope": "private"},
    }
    (tmp_path / "tools.json").write_text(json.dumps(document), encoding="utf-8")
    toml = tmp_path / "toolproof.toml"
    toml.write_text(
        "[[mcp]]\n"
        'name = "fs"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}, {json.dumps(str(tmp_path / 'tools.json'))}]\n",
        encoding="utf-8",
    )
    return toml


async def lock_and_rename(toml: Path) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    async with load_toolset(toml, lock=False) as toolset:
        write_lock(toml.parent / LOCK_FILE, build_lock(toolset))
    async with load_toolset(toml) as toolset:
        revision = toolset.resources[MCP_SERVERS]["fs"]["protocol_version"]
        before = await toolset["fs_read_file"].call({"path": "a"})
        renamed = await toolset["fs_rename"].call({"name": "read_file", "to": "read_text"})
        after = await toolset["fs_read_file"].call({"path": "a"})
        assert (revision, before.ok, renamed.value) == ("2026-07-28", True, "renamed")
        return (
            before,
            after,
            await toolset["fs_rename"].call({"name": "x", "to": "y"}),
            list(toolset.resources[MCP_LIVE]["fs"].drift),
        )


def test_a_stale_listing_is_checked_again_and_a_renamed_tool_is_drift(tmp_path: Path) -> None:
    _, after, other, drift = asyncio.run(lock_and_rename(config(tmp_path, 0)))
    assert after.failure is not None and after.failure.kind == "unavailable"
    assert after.failure.message == (
        "tool 'fs_read_file' is quarantined: MCP server 'fs' changed it after it was bound "
        "(its tools/list was past its ttlMs): the server renamed it to 'read_text'; reload "
        "the tools and review the change (toolproof lock --check, then --update)"
    )
    assert drift == [{"name": "fs_read_file", "kind": "renamed", "changes": [], "to": "read_text"}]
    assert other.ok  # the unchanged tool keeps answering


def test_a_fresh_listing_is_not_listed_again_until_the_next_load(tmp_path: Path) -> None:
    toml = config(tmp_path, 3_600_000)
    _, after, _, drift = asyncio.run(lock_and_rename(toml))
    # within the hour the server granted, the old name is still called (the server
    # answers it as an unknown tool, echoing): nothing was listed again
    assert (after.ok, drift) == (True, [])

    async def reload() -> list[tuple[str, str | None]]:
        async with load_toolset(toml) as toolset:
            return [(q.name, q.drift["kind"] if q.drift else None) for q in toolset.quarantined]

    assert asyncio.run(reload()) == [("fs_read_file", "vanished"), ("fs_read_text", "new")]
