"""The ``[[mcp]]`` client negotiates 2026-07-28 or 2025-11-25 through the SDK's ``mcp.Client``.

The server is ``tests/fixtures/mcp_asking_server.py``, built on the official SDK's
``MCPServer``: it speaks both revisions (``--legacy``: it refuses ``server/discover``, as
a 2025-11-25 server does, and the client falls back to ``initialize``). Over both, the
same tools bind with the same specs, the lock taken over one holds over the other, and
``toolproof serve`` in front of it relays the server's elicitation to its own client.
Sampling and elicitation are announced only when someone can answer.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp_support import ROOT

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.tools.lock import build_lock, write_lock
from toolproof.tools.resources import LOCK_DRIFT, MCP_SERVERS

ASKING = ROOT / "tests" / "fixtures" / "mcp_asking_server.py"
REVISIONS = [("2026-07-28", False), ("2025-11-25", True)]


def asking_config(tmp_path: Path, legacy: bool, name: str = "toolproof.toml") -> Path:
    """The fixture as ``[[mcp]] ask``; ``legacy``: a 2025-11-25 server (``ASKING_LEGACY``)."""
    path = tmp_path / name
    env = '\nenv = { ASKING_LEGACY = "1" }' if legacy else ""
    path.write_text(
        f'[[mcp]]\nname = "ask"\ncommand = "{sys.executable}"\nargs = ["{ASKING}"]{env}\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_both_revisions_bind_the_same_tools_and_answer_alike(
    tmp_path: Path, revision: str, legacy: bool
) -> None:
    async def main() -> None:
        async with load_toolset(asking_config(tmp_path, legacy)) as toolset:
            entry = toolset.resources[MCP_SERVERS]["ask"]
            assert entry["protocol_version"] == revision
            assert entry["server_info"] == {"name": "asking", "version": "3.1"}
            assert toolset.names() == [
                "ask_add",
                "ask_decide",
                "ask_greet",
                "ask_haiku",
                "ask_touch",
            ]
            assert toolset.quarantined == ()
            assert toolset["ask_add"].spec.input_schema == {
                "type": "object",
                "properties": {
                    "a": {"title": "A", "type": "integer"},
                    "b": {"title": "B", "type": "integer"},
                },
                "required": ["a", "b"],
                "title": "addArguments",
            }
            added = await toolset["ask_add"].call({"a": 2, "b": 40})
            assert added.value == {"result": 42}  # no serverInfo stamp in the value
            # nobody to ask: elicitation is not announced, and the server says so
            greeted = await toolset["ask_greet"].call({"greeting": "Hello"})
            assert greeted.failure is not None
            assert greeted.failure.message == (
                "MCP server 'ask' answered tools/call with error -32021: Client did not "
                "declare the form elicitation capability required by resolver "
                "'__main__:ask_who'"
            )

    asyncio.run(main())


def test_a_lock_taken_over_one_revision_holds_over_the_other(tmp_path: Path) -> None:
    modern = asking_config(tmp_path, False, "modern.toml")
    legacy = asking_config(tmp_path, True, "legacy.toml")

    async def main() -> None:
        async with load_toolset(modern, lock=False) as toolset:
            write_lock(tmp_path / "asking.lock", build_lock(toolset))
        async with load_toolset(legacy, lock=tmp_path / "asking.lock") as toolset:
            assert toolset.resources[MCP_SERVERS]["ask"]["protocol_version"] == "2025-11-25"
            assert toolset.resources[LOCK_DRIFT] == []
            assert toolset.names() == [
                "ask_add",
                "ask_decide",
                "ask_greet",
                "ask_haiku",
                "ask_touch",
            ]

    asyncio.run(main())


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_serve_relays_the_upstream_elicitation_to_its_client(
    tmp_path: Path, revision: str, legacy: bool
) -> None:
    asked: list[dict[str, Any]] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def main() -> None:
        config = asking_config(tmp_path, legacy)
        async with (
            load_toolset(config, relay=True) as toolset,
            Client(build_server(toolset), mode="legacy", elicitation_callback=elicit) as client,
        ):
            assert toolset.resources[MCP_SERVERS]["ask"]["protocol_version"] == revision
            result = await client.call_tool("ask_greet", {"greeting": "Hello"})
            assert result.is_error is False
            assert result.structured_content == {"result": "Hello, Ada!"}

    asyncio.run(main())
    assert [(item["message"], item["requestedSchema"]["required"]) for item in asked] == [
        ("Who is asking?", ["name"])
    ]


class Inbox:
    """The notifications one client received, with a way to wait for a count."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.startswith("notifications/"):
            params = getattr(message, "params", None)
            dumped = params.model_dump(mode="json", exclude_none=True) if params else {}
            self.received.append((method, dumped))
            self._changed.set()

    async def wait_for(self, count: int) -> None:
        while len(self.received) < count:
            self._changed.clear()
            await self._changed.wait()


def test_serve_follows_a_2026_servers_resource_and_list_changes_through_listen(
    tmp_path: Path,
) -> None:
    # 2026-07-28 has no resources/subscribe and no unsolicited list_changed: the client
    # opens subscriptions/listen streams, and serve's own 2025-11-25 client sees the same
    inbox = Inbox()

    async def main() -> None:
        config = asking_config(tmp_path, False)
        async with (
            load_toolset(config, relay=True) as toolset,
            Client(build_server(toolset), mode="legacy", message_handler=inbox) as client,
        ):
            entry = toolset.resources[MCP_SERVERS]["ask"]
            assert entry["protocol_version"] == "2026-07-28"
            await client.list_tools()
            with warnings.catch_warnings():  # removed by protocol 2026-07-28 (listen())
                warnings.simplefilter("ignore")
                await client.subscribe_resource("test://watched")
            assert (await client.call_tool("ask_touch", {})).structured_content == {
                "result": "touched"
            }
            await inbox.wait_for(2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.unsubscribe_resource("test://watched")
            await client.call_tool("ask_touch", {})
            await inbox.wait_for(3)
            assert entry["list_changed"] == 2

    asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(inbox.received[:2]) == [
        ("notifications/resources/updated", {"uri": "test://watched"}),
        ("notifications/tools/list_changed", {}),
    ]
    assert inbox.received[2:] == [("notifications/tools/list_changed", {})]
