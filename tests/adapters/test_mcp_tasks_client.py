"""The ``[[mcp]]`` client takes a server's tasks (``io.modelcontextprotocol/tasks``).

Upstream is a real ``toolproof serve --record`` over stdio whose tools on the
``process`` backend answer 2026-07-28 tasks (:mod:`toolproof.adapters.mcp.tasks`).
Downstream, ``load_toolset`` imports it with ``[[mcp]]``: an imported task tool answers
its value as if the server had answered at once (the client polled ``tasks/get``);
a call over ``call_timeout`` sends ``tasks/cancel`` first, so upstream the worker is
killed and the call is recorded as cancelled by ``tasks/cancel``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_tasks_support import alive

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.sources.mcp.tasks import CreatedTask, McpTasks

UPSTREAM = '''
import os
import time
from pathlib import Path

import toolproof


@toolproof.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@toolproof.tool
def sleepy(seconds: float, marker: str) -> str:
    """Write this process's pid to ``marker``, then block for ``seconds``."""
    Path(marker).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(seconds)
    return "slept"
'''
UPSTREAM_TOML = """[[python]]
module = "upstream_tools"

[tools.add]
extensions = [["process"]]

[tools.sleepy]
extensions = [["process"]]
"""


def upstream(tmp_path: Path) -> Path:
    (tmp_path / "upstream_tools.py").write_text(UPSTREAM, encoding="utf-8")
    path = tmp_path / "upstream.toml"
    path.write_text(UPSTREAM_TOML, encoding="utf-8")
    return path


def test_the_sdk_client_with_mcp_tasks_resolves_a_task(tmp_path: Path) -> None:
    async def main() -> tuple[Any, Any]:
        async with (
            load_toolset(upstream(tmp_path)) as toolset,
            Client(build_server(toolset), mode="2026-07-28", extensions=[McpTasks()]) as client,
        ):
            created = await client.session.call_tool(
                "add_process", {"a": 2, "b": 2}, allow_claimed=True
            )
            return created, await client.call_tool("add_process", {"a": 20, "b": 22})

    created, result = asyncio.run(main())
    assert isinstance(created, CreatedTask)
    assert (created.status, created.ttl_ms, created.poll_interval_ms) == ("working", 3600000, 500)
    assert (result.is_error, result.structured_content) == (False, {"result": 42})


def test_an_imported_task_answers_its_value_and_a_timeout_cancels_it_upstream(
    tmp_path: Path,
) -> None:
    root = tmp_path / "artifacts"
    serve = [
        "-c",
        "from toolproof.adapters.cli import main; main()",
        "serve",
        "--config",
        str(upstream(tmp_path)),
        "--record",
        str(root),
    ]
    downstream = tmp_path / "toolproof.toml"
    downstream.write_text(
        f'[[mcp]]\nname = "up"\ncommand = "{sys.executable}"\nargs = {json.dumps(serve)}\n'
        "call_timeout = 8\n",
        encoding="utf-8",
    )
    marker = tmp_path / "pid"

    async def main() -> tuple[Any, Any]:
        async with load_toolset(downstream) as toolset:
            added = await toolset["up_add_process"].call({"a": 40, "b": 2})
            slow = await toolset["up_sleepy_process"].call({"seconds": 60, "marker": str(marker)})
            return added, slow

    added, slow = asyncio.run(main())  # leaving the block stops upstream: its run is sealed
    assert (added.ok, added.value) == (True, {"result": 42}), added.failure
    assert slow.failure is not None
    assert (slow.failure.kind, slow.failure.message) == (
        "timeout",
        "MCP server 'up' did not answer tools/call within 8 s",
    )
    pid = int(marker.read_text(encoding="utf-8"))
    assert pid != os.getpid() and not alive(pid)  # tasks/cancel: upstream killed the worker
    run = next((root / "runs").iterdir())
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    results = [e["result"] for e in events if e["type"] == "tool_returned"]
    assert results[0]["value"] == 42
    assert results[1]["failure"]["message"] == (
        "tool 'sleepy_process': the task was cancelled (tasks/cancel) before the call finished"
    )
