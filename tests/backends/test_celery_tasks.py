"""An MCP task on the celery backend: ``tasks/cancel`` revokes it, as a timeout does.

A real ``toolproof worker`` on the tests' own Redis (``backend_support.require_redis``)
runs the body; the official SDK's ``mcp.Client`` (with the extension of
``tests/runs/mcp_tasks_support``) calls :func:`build_server` in-process over 2026-07-28.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from backend_support import (
    CONFIG,
    REDIS_URL,
    copy_fixture,
    parent_of,
    require_redis,
    run,
    stop_servers,
    wait_gone,
)
from mcp import Client
from mcp_tasks_support import CreatedTask, TasksClientExtension, poll, task_request

from toolproof.adapters.mcp.server import build_server
from toolproof.config import load_toolset

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
SLEEPY_CELERY_3_S = '{ name = "celery", config = { timeout = 3 } }'
SLEEPY_CELERY_60_S = '{ name = "celery", config = { timeout = 60 } }'
TASKS = TasksClientExtension()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """The fixture's Toolset (``sleepy_celery`` may take 60 s); the pid of its one worker."""
    require_redis()
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    home = tmp_path_factory.mktemp("celery-tasks")
    text = CONFIG.read_text(encoding="utf-8")
    assert SLEEPY_CELERY_3_S in text
    path = copy_fixture(home, text.replace(SLEEPY_CELERY_3_S, SLEEPY_CELERY_60_S))
    log = home / "worker.log"
    with log.open("wb") as handle:
        worker = subprocess.Popen(
            [*TOOLPROOF, "worker", "--config", str(path), "--concurrency", "1"],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while b" ready." not in log.read_bytes():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield path, worker.pid
    finally:
        stop_servers([worker])
        client.flushdb()
        client.close()


def test_cancelling_a_celery_task_revokes_and_kills_the_body(served: tuple[Path, int]) -> None:
    config, worker = served
    marker = config.parent / "revoked"
    started = Path(str(marker) + ".started")

    async def go() -> tuple[int, dict[str, Any], dict[str, Any]]:
        async with (
            load_toolset(config) as toolset,
            Client(build_server(toolset), mode="2026-07-28", extensions=[TASKS]) as client,
        ):
            arguments = {"seconds": 30, "marker": str(marker)}
            created = await client.session.call_tool("sleepy_celery", arguments, allow_claimed=True)
            assert isinstance(created, CreatedTask)
            while not started.exists() or not started.read_text(encoding="utf-8"):
                await asyncio.sleep(0.02)
            pid = int(started.read_text(encoding="utf-8"))
            assert parent_of(pid) == worker  # the body runs in the worker's pool
            ack = await task_request(client.session, "tasks/cancel", created.task_id)
            return pid, ack, await poll(client.session, created.task_id)

    pid, ack, state = run(go())
    assert ack["resultType"] == "complete"
    assert (state["status"], state["statusMessage"]) == (
        "cancelled",
        "tool 'sleepy_celery': the task was cancelled (tasks/cancel) before the call finished",
    )
    assert wait_gone([pid], 5.0) == []  # revoked with terminate: the pool process is gone
    assert not marker.exists()  # the body never finished


def test_a_celery_task_completes_on_the_worker(served: tuple[Path, int]) -> None:
    config, worker = served

    async def go() -> tuple[CreatedTask, dict[str, Any]]:
        async with (
            load_toolset(config) as toolset,
            Client(
                build_server(toolset), mode="2026-07-28", extensions=[TasksClientExtension()]
            ) as client,
        ):
            created = await client.session.call_tool("whoami_celery", {}, allow_claimed=True)
            assert isinstance(created, CreatedTask)
            return created, await poll(client.session, created.task_id)

    created, state = run(go())
    assert (created.status, state["status"]) == ("working", "completed")
    pid = state["result"]["structuredContent"]["result"]
    assert isinstance(pid, int) and parent_of(pid) == worker
