"""An imported server's resource updates and list changes reach the right client sessions.

``tests/fixtures/mcp_notify_server.py`` is imported over stdio (``[[mcp]]``); two
official ``mcp`` clients connect to one in-process ``build_server``: the one that
subscribed to ``test://watched`` gets its ``notifications/resources/updated``, the one
that did not does not; both, having listed, get the ``list_changed`` notifications.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

from mcp import Client

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_notify_server.py"
LISTS = [
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
]


def config(tmp_path: Path) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[mcp]]\nname = "n"\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\nprefix = ""\n'
        # a 2025-11-25 server: it notifies on its own (2026-07-28 has subscriptions/listen)
        'protocol = "2025-11-25"\n',
        encoding="utf-8",
    )
    return path


class Inbox:
    """The notifications one client received, with a way to wait for a count."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.params: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.startswith("notifications/"):
            self.methods.append(method)
            params = getattr(message, "params", None)
            self.params.append(params.model_dump(mode="json", exclude_none=True) if params else {})
            self._changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(30):
            while len(self.methods) < count:
                self._changed.clear()
                await self._changed.wait()


async def scenario(path: Path) -> tuple[Inbox, Inbox, Any]:
    watcher, other = Inbox(), Inbox()
    async with load_toolset(path) as toolset:
        server = build_server(toolset)
        async with (
            Client(server, message_handler=watcher, mode="legacy") as first,
            Client(server, message_handler=other, mode="legacy") as second,
        ):
            await first.list_resources()
            await second.list_tools()
            with warnings.catch_warnings():  # removed by protocol 2026-07-28 (listen())
                warnings.simplefilter("ignore")
                await first.subscribe_resource("test://watched")
            await watcher.wait_for(1)
            answer = await second.call_tool("change", {})
            await watcher.wait_for(4)
            await other.wait_for(3)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await first.unsubscribe_resource("test://watched")
            still = await second.call_tool("change", {})  # a bound tool keeps working
            await watcher.wait_for(7)
            await other.wait_for(6)
    return watcher, other, (answer.content[0].text, still.content[0].text)


def test_updates_go_to_the_subscriber_and_list_changes_to_every_lister(tmp_path: Path) -> None:
    watcher, other, answers = asyncio.run(scenario(config(tmp_path)))
    assert answers == ("changed", "changed")
    assert watcher.methods[0] == "notifications/resources/updated"
    assert watcher.params[0] == {"uri": "test://watched"}
    assert sorted(watcher.methods[1:4]) == LISTS
    assert sorted(watcher.methods[4:]) == LISTS
    assert "notifications/resources/updated" not in other.methods
    assert sorted(other.methods[:3]) == LISTS and sorted(other.methods[3:]) == LISTS
