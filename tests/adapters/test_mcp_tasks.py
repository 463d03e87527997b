"""Served tool calls as tasks (``io.modelcontextprotocol/tasks``, SEP-2663) on 2026-07-28.

The official SDK's ``mcp.Client`` (with the extension of ``tests/runs/mcp_tasks_support``)
calls :func:`build_server` (what ``toolproof serve`` runs) in-process: a tool on the
``process`` backend answers a ``CreateTaskResult``, ``tasks/get`` polls it to its result;
``tasks/cancel`` kills the worker running the body (its pid is gone) and the task ends
``cancelled``; a question of the body is ``input_required`` and ``tasks/update`` answers
it. A real ``toolproof serve --http --record`` records a completed and a cancelled task
and the run verifies.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_tasks_support import TASKS, CreatedTask, TasksClientExtension, alive, poll, task_request
from serve_helpers import free_port, spawn

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.adapters.mcp.tasks import task_tools
from toolproof.config import CONFIG
from toolproof.errors import ConfigError

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
MODULE = '''
import os
import time
from pathlib import Path

import toolproof
from toolproof import Context

WHO = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


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


@toolproof.tool
async def greet(ctx: Context) -> str:
    """Greet whoever answers."""
    who = await ctx.elicit("Who is asking?", WHO)
    return f"Hello, {who['content']['name']}!"
'''
TOML = """[[python]]
module = "task_tools"

[tools.add]
extensions = [["process"]]

[tools.sleepy]
extensions = [["process"]]
"""
TTL_MS = 3600000


def config(tmp_path: Path) -> Path:
    (tmp_path / "task_tools.py").write_text(MODULE, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(TOML, encoding="utf-8")
    return path


async def wait_pid(marker: Path) -> int:
    while not marker.exists() or not marker.read_text(encoding="utf-8"):
        await asyncio.sleep(0.02)
    return int(marker.read_text(encoding="utf-8"))


def tasks_client(server: Any) -> Client:
    return Client(server, mode="2026-07-28", extensions=[TasksClientExtension()])


def test_a_process_tool_is_a_task_polled_to_its_result(tmp_path: Path) -> None:
    async def main() -> tuple[CreatedTask, dict[str, Any], types.CallToolResult, Any]:
        async with load_toolset(config(tmp_path)) as toolset:
            server = build_server(toolset)
            async with Client(server) as probe:  # server/discover: the announced extensions
                extensions = probe.server_capabilities.extensions
            async with tasks_client(server) as client:
                created = await client.session.call_tool(
                    "add_process", {"a": 2, "b": 3}, allow_claimed=True
                )
                assert isinstance(created, CreatedTask)
                state = await poll(client.session, created.task_id)
                resolved = await client.call_tool("add_process", {"a": 4, "b": 5})
        return created, state, resolved, extensions

    created, state, resolved, extensions = asyncio.run(main())
    assert extensions == {TASKS: {}}
    assert (created.status, created.ttl_ms, created.poll_interval_ms) == ("working", TTL_MS, 500)
    assert created.created_at.endswith("Z")
    assert state["resultType"] == "complete"
    assert (state["taskId"], state["status"], state["ttlMs"]) == (
        created.task_id,
        "completed",
        TTL_MS,
    )
    assert state["result"]["content"] == [{"type": "text", "text": "5"}]
    assert state["result"]["structuredContent"] == {"result": 5}
    assert (resolved.is_error, resolved.structured_content) == (False, {"result": 9})


def test_cancel_kills_the_worker_and_the_task_ends_cancelled(tmp_path: Path) -> None:
    marker = tmp_path / "pid"

    async def main() -> tuple[int, dict[str, Any], dict[str, Any], bool]:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            tasks_client(build_server(toolset)) as client,
        ):
            arguments = {"seconds": 60, "marker": str(marker)}
            created = await client.session.call_tool(
                "sleepy_process", arguments, allow_claimed=True
            )
            assert isinstance(created, CreatedTask)
            pid = await wait_pid(marker)
            assert alive(pid)
            working = await task_request(client.session, "tasks/get", created.task_id)
            assert working["status"] == "working"
            ack = await task_request(client.session, "tasks/cancel", created.task_id)
            state = await poll(client.session, created.task_id)
            gone = not alive(pid)  # terminal only once the worker was killed and reaped
        return pid, ack, state, gone

    pid, ack, state, gone = asyncio.run(main())
    assert pid != os.getpid()
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    assert (state["status"], state["statusMessage"]) == (
        "cancelled",
        "tool 'sleepy_process': the task was cancelled (tasks/cancel) before the call finished",
    )
    assert "result" not in state
    assert gone


def test_a_question_is_input_required_and_tasks_update_answers_it(tmp_path: Path) -> None:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        raise AssertionError("a task's question is answered by tasks/update, not a request")

    async def main() -> list[dict[str, Any]]:
        async with load_toolset(config(tmp_path)) as toolset:
            server = build_server(toolset, tasks=lambda tool: tool.name == "greet")
            async with Client(
                server,
                mode="2026-07-28",
                extensions=[TasksClientExtension()],
                elicitation_callback=elicit,
            ) as client:
                created = await client.session.call_tool("greet", {}, allow_claimed=True)
                assert isinstance(created, CreatedTask)
                state = await task_request(client.session, "tasks/get", created.task_id)
                while state["status"] == "working":
                    state = await task_request(client.session, "tasks/get", created.task_id)
                answer = {"action": "accept", "content": {"name": "Ada"}}
                ignored = {"q9": {"action": "decline"}}
                await task_request(client.session, "tasks/update", created.task_id, ignored)
                ack = await task_request(
                    client.session, "tasks/update", created.task_id, {"q1": answer}
                )
                final = await poll(client.session, created.task_id)
        return [state, ack, final]

    asked, ack, final = asyncio.run(main())
    assert (asked["status"], list(asked["inputRequests"])) == ("input_required", ["q1"])
    assert asked["inputRequests"]["q1"]["method"] == "elicitation/create"
    assert asked["inputRequests"]["q1"]["params"]["message"] == "Who is asking?"
    assert ack["resultType"] == "complete"
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"] == {"result": "Hello, Ada!"}


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_without_the_extension_the_call_answers_as_ever(tmp_path: Path, mode: str) -> None:
    async def main() -> types.CallToolResult:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(build_server(toolset), mode=mode) as client,  # type: ignore[arg-type]
        ):
            return await client.call_tool("add_process", {"a": 1, "b": 1})

    result = asyncio.run(main())
    assert (result.is_error, result.structured_content) == (False, {"result": 2})


def test_an_unknown_task_is_invalid_params_and_legacy_has_no_tasks_methods(
    tmp_path: Path,
) -> None:
    async def main() -> list[tuple[int, str]]:
        errors: list[tuple[int, str]] = []
        async with load_toolset(config(tmp_path)) as toolset:
            server = build_server(toolset)
            for mode in ("2026-07-28", "legacy"):
                async with Client(server, mode=mode) as client:  # type: ignore[arg-type]
                    with pytest.raises(MCPError) as raised:
                        await task_request(client.session, "tasks/get", "nope")
                    errors.append((raised.value.error.code, raised.value.error.message))
        return errors

    assert asyncio.run(main()) == [
        (-32602, "task 'nope': no such task (unknown, expired, or another client's)"),
        (-32601, "Method not found"),
    ]


def test_no_task_tool_announces_no_extension(tmp_path: Path) -> None:
    async def main() -> Any:
        async with load_toolset(config(tmp_path)) as toolset:
            server = build_server(toolset, tasks=lambda tool: False)
            async with Client(server) as probe:
                extensions = probe.server_capabilities.extensions
            async with tasks_client(server) as client:
                created = await client.session.call_tool(
                    "add_process", {"a": 1, "b": 2}, allow_claimed=True
                )
                return extensions, created

    extensions, created = asyncio.run(main())
    assert extensions is None
    assert isinstance(created, types.CallToolResult)
    assert created.structured_content == {"result": 3}


def _run_dir(root: Path) -> Path:
    runs = sorted((root / "runs").iterdir())
    assert len(runs) == 1
    return runs[0]


def test_serve_records_completed_and_cancelled_tasks_and_the_run_verifies(
    tmp_path: Path,
) -> None:
    path = config(tmp_path)
    root = tmp_path / "artifacts"
    port = free_port()
    marker = tmp_path / "pid"
    url = f"http://127.0.0.1:{port}/mcp"

    async def main() -> tuple[dict[str, Any], dict[str, Any], int]:
        async with tasks_client(url) as client:
            done = await client.session.call_tool(
                "add_process", {"a": 20, "b": 22}, allow_claimed=True
            )
            assert isinstance(done, CreatedTask)
            arguments = {"seconds": 60, "marker": str(marker)}
            slow = await client.session.call_tool("sleepy_process", arguments, allow_claimed=True)
            assert isinstance(slow, CreatedTask)
            pid = await wait_pid(marker)
            await task_request(client.session, "tasks/cancel", slow.task_id)
            return (
                await poll(client.session, done.task_id),
                await poll(client.session, slow.task_id),
                pid,
            )

    args = ["serve", "--config", str(path), "--http", f"127.0.0.1:{port}", "--record", str(root)]
    with spawn(args, port):
        completed, cancelled, pid = asyncio.run(main())
    assert (completed["status"], cancelled["status"]) == ("completed", "cancelled")
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)
    run = _run_dir(root)
    verified = subprocess.run(
        [*TOOLPROOF, "verify", run.name, "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    tools = {e["call_id"]: e["call"]["tool"] for e in events if e["type"] == "tool_called"}
    outcomes = {tools[e["call_id"]]: e["result"] for e in events if e["type"] == "tool_returned"}
    assert outcomes["add_process"]["value"] == 42
    failure = outcomes["sleepy_process"]["failure"]
    assert (failure["kind"], failure["where"]) == ("cancelled", "runtime")


def test_serve_tasks_globs_choose_the_task_tools_and_a_stray_glob_is_refused(
    tmp_path: Path,
) -> None:
    path = config(tmp_path)
    path.write_text(TOML + '\n[serve]\ntasks = ["greet", "add"]\n', encoding="utf-8")

    async def chosen() -> list[str]:
        async with load_toolset(path) as toolset:
            takes = task_tools(toolset.resources[CONFIG].serve.tasks)
            return sorted(tool.name for tool in toolset.exposed() if takes(tool))

    assert asyncio.run(chosen()) == ["add", "greet"]
    path.write_text(TOML + '\n[serve]\ntasks = ["add_*", "sleep"]\n', encoding="utf-8")

    async def load() -> None:
        async with load_toolset(path):
            pass

    with pytest.raises(ConfigError) as raised:
        asyncio.run(load())
    assert (raised.value.key, raised.value.rule) == (
        "serve.tasks[1]",
        "glob 'sleep' matches no tool (tools: add, add_process, greet, sleepy, sleepy_process; "
        "rule: each [serve] glob names at least one tool, so a misspelt one is noticed)",
    )
