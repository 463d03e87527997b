"""The celery backend against real ``toolproof worker`` processes and a real Redis.

The Redis is the tests' own (``backend_support.require_redis``: a ``redis-server``
on a free port); its DB 15 is flushed. Under ``CI=true`` a missing ``redis-server``
fails these tests; elsewhere they skip.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from backend_support import (
    CONFIG,
    REDIS_PORT,
    REDIS_URL,
    alive,
    copy_fixture,
    parent_of,
    require_redis,
    run,
    wait_file,
    wait_gone,
)

from toolproof.backends.celery import close_app, make_app, revoked_key, settings_from
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolFailure, ToolResult

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def _start(log: Path, *args: str, config: Path = CONFIG) -> Worker:
    handle = log.open("wb")
    process = subprocess.Popen(
        [*TOOLPROOF, "worker", "--config", str(config), *args],
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    handle.close()
    return Worker(process, log)


def _wait_ready(worker: Worker, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b" ready." in worker.log.read_bytes():
            return
        if worker.process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"worker did not become ready:\n{worker.log.read_text('utf-8')}")


def _stop(workers: list[Worker]) -> None:
    """Warm-shut every worker down at once; check that no pool process is left behind."""
    pids = [pid for worker in workers for pid in (worker.pid, *_children(worker.pid))]
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.process.wait(15)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
    assert wait_gone(pids) == []


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="utf-8")
    except OSError:  # the process is gone (or going)
        return []
    return [int(p) for p in text.split()]


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Worker]]:
    require_redis()
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    logs = tmp_path_factory.mktemp("celery-workers")
    started = {
        "default": _start(logs / "default.log", "--concurrency", "2"),
        "other": _start(logs / "other.log", "--queue", "other", "--concurrency", "1"),
    }
    try:
        for worker in started.values():
            _wait_ready(worker)
        yield started
    finally:
        _stop(list(started.values()))
        client.flushdb()
        client.close()


def call(tool: str, arguments: dict[str, Any], config: Path = CONFIG) -> tuple[ToolResult, float]:
    async def go() -> tuple[ToolResult, float]:
        async with load_toolset(config) as toolset:
            began = time.monotonic()
            result = await toolset[tool].call(arguments)
            return result, time.monotonic() - began

    return run(go())


def failure_of(result: ToolResult) -> ToolFailure:
    assert result.failure is not None, result
    return result.failure


def test_success_runs_on_the_worker(workers: dict[str, Worker]) -> None:
    result, _ = call("add_celery", {"a": 40, "b": 2})
    assert result.ok and result.value == 42
    pid, _ = call("whoami_celery", {})
    assert isinstance(pid.value, int) and pid.value != os.getpid()
    assert parent_of(pid.value) == workers["default"].pid


def test_body_failure_travels_as_json(workers: dict[str, Worker]) -> None:
    result, _ = call("crash_celery", {"code": 9})
    failure = failure_of(result)
    assert (failure.kind, failure.where) == ("worker", "worker")
    task_id = failure.detail["task_id"]
    assert failure.message == (
        f"celery task {task_id}: the worker process running it was lost (WorkerLostError: "
        f"Worker exited prematurely: exitcode 9 Job: {failure.message.split('Job: ')[1]}"
    )


def test_invalid_arguments_are_refused_before_submit(workers: dict[str, Worker]) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    before = sorted(client.scan_iter("celery-task-meta-*"))
    result, _ = call("add_celery", {"a": 1, "b": 2, "priority": 12})
    after = sorted(client.scan_iter("celery-task-meta-*"))
    client.close()
    failure = failure_of(result)
    assert failure.kind == "invalid_arguments"
    assert failure.message == (
        "invalid arguments for tool 'add_celery': argument 'priority': 12 is greater than "
        "the maximum of 9"
    )
    assert after == before  # no task was sent, so no result was stored


def test_call_options_are_in_the_schema_and_never_reach_the_body(
    workers: dict[str, Worker],
) -> None:
    async def schema() -> dict[str, Any]:
        async with load_toolset(CONFIG) as toolset:
            return toolset["add_celery"].spec.input_schema

    properties = run(schema())["properties"]
    assert list(properties) == ["a", "b", "queue", "countdown", "priority", "expires"]
    # add forbids extra properties: the options must have been removed before the body.
    result, elapsed = call(
        "add_celery", {"a": 1, "b": 2, "priority": 5, "countdown": 1, "expires": 60}
    )
    assert result.value == 3
    assert elapsed >= 1.0  # countdown reached Celery


def test_queue_option_routes_to_the_worker_on_that_queue(workers: dict[str, Worker]) -> None:
    other, _ = call("whoami_celery", {"queue": "other"})
    default, _ = call("whoami_celery", {})
    assert isinstance(other.value, int) and isinstance(default.value, int)
    assert parent_of(other.value) == workers["other"].pid
    assert parent_of(default.value) == workers["default"].pid


def test_expired_call_is_cancelled_not_run(workers: dict[str, Worker]) -> None:
    result, _ = call("add_celery", {"a": 1, "b": 2, "countdown": 1, "expires": 0.5})
    failure = failure_of(result)
    assert (failure.kind, failure.where) == ("cancelled", "backend")
    assert failure.detail["state"] == "REVOKED"


SLEEPY_CELERY_3_S = '{ name = "celery", config = { timeout = 3 } }'
SLEEPY_CELERY_60_S = '{ name = "celery", config = { timeout = 60 } }'


def test_worker_process_killed_mid_task_fails_fast(
    workers: dict[str, Worker], tmp_path: Path
) -> None:
    # "Fast": as a lost worker process, never by waiting for the call's timeout. The
    # timeout here is 60 s (the body sleeps 30 s), so a timeout cannot be what fires
    # however loaded the host is; no wall-clock bound is asserted.
    text = CONFIG.read_text(encoding="utf-8")
    assert SLEEPY_CELERY_3_S in text
    config = copy_fixture(tmp_path, text.replace(SLEEPY_CELERY_3_S, SLEEPY_CELERY_60_S))
    marker = tmp_path / "job"
    # Kill a settled pool process: billiard notices a pool process's death through its
    # pipes, and a pool process that is still starting holds inherited pipe ends, so
    # a death right after a replacement can be noticed late. This test runs before the
    # time-limit kill below.
    for _ in range(3):
        assert call("add_celery", {"a": 1, "b": 1})[0].value == 2

    async def go() -> ToolResult:
        async with load_toolset(config) as toolset:
            task = asyncio.ensure_future(
                toolset["sleepy_celery"].call({"seconds": 30, "marker": str(marker)})
            )
            pid = int(await asyncio.to_thread(wait_file, Path(str(marker) + ".started")))
            assert parent_of(pid) == workers["default"].pid
            os.kill(pid, signal.SIGKILL)
            return await task

    failure = failure_of(run(go()))
    assert failure.kind != "timeout"
    assert (failure.kind, failure.where) == ("worker", "worker")
    assert failure.detail["exception"] == "WorkerLostError"
    task_id = failure.detail["task_id"]
    job = failure.message.split("Job: ")[1]
    assert failure.message == (
        f"celery task {task_id}: the worker process running it was lost (WorkerLostError: "
        f"Worker exited prematurely: signal 9 (SIGKILL) Job: {job}"
    )
    assert not marker.exists()  # the body never finished
    assert alive(workers["default"].pid)
    after, _ = call("add_celery", {"a": 2, "b": 2})
    assert after.value == 4  # the worker replaced its pool process


def test_timeout_names_the_task_and_stops_the_body(
    workers: dict[str, Worker], tmp_path: Path
) -> None:
    marker = tmp_path / "done"
    result, elapsed = call("sleepy_celery", {"seconds": 6, "marker": str(marker)})
    failure = failure_of(result)
    task_id = failure.detail["task_id"]
    assert (failure.kind, failure.where) == ("timeout", "backend")
    assert failure.message == (
        f"celery task {task_id} gave no result within 3.0 s; it will not run later (it "
        "expired at that deadline and was revoked), and a body already running is stopped "
        "by its time limit at 4 s"
    )
    # one-sided: it waited out its 3 s deadline, not the 6 s body
    assert 3.0 <= elapsed < 6.0
    pid = int(Path(str(marker) + ".started").read_text(encoding="utf-8"))
    assert wait_gone([pid], 5.0) == []  # the hard time limit (4 s) killed the body
    assert not marker.exists()


def test_cancelling_the_caller_revokes_and_kills_the_task(
    workers: dict[str, Worker], tmp_path: Path
) -> None:
    marker = tmp_path / "cancelled"

    async def go() -> int:
        async with load_toolset(CONFIG) as toolset:
            task = asyncio.ensure_future(
                toolset["sleepy_celery"].call({"seconds": 30, "marker": str(marker)})
            )
            pid = int(await asyncio.to_thread(wait_file, Path(str(marker) + ".started")))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return pid

    pid = run(go())
    assert wait_gone([pid], 5.0) == []  # revoked with terminate: the pool process is gone
    assert not marker.exists()


def test_broker_down_is_a_clear_error_within_the_connect_timeout(tmp_path: Path) -> None:
    text = CONFIG.read_text(encoding="utf-8").replace(
        f'broker = "{REDIS_URL}"', 'broker = "redis://127.0.0.1:1/15"'
    )
    config = copy_fixture(tmp_path, text)
    result, elapsed = call("add_celery", {"a": 1, "b": 2}, config)
    failure = failure_of(result)
    assert (failure.kind, failure.where, failure.retryable) == ("unavailable", "backend", True)
    assert failure.message.startswith("celery broker redis://127.0.0.1:1/15 is unreachable: ")
    assert "Connection refused" in failure.message
    assert failure.message.endswith("(connect timeout 2.0 s)")
    assert elapsed < 2.0


def test_result_backend_down_names_the_result_backend(tmp_path: Path) -> None:
    require_redis()
    text = CONFIG.read_text(encoding="utf-8").replace(
        f'broker = "{REDIS_URL}"',
        f'broker = "{REDIS_URL}"\nresult_backend = "redis://:pw@127.0.0.1:1/15"',
    )
    config = copy_fixture(tmp_path, text)
    result, elapsed = call("add_celery", {"a": 1, "b": 2}, config)
    failure = failure_of(result)
    assert (failure.kind, failure.where, failure.retryable) == ("unavailable", "backend", True)
    assert failure.message.startswith(
        "celery result backend redis://:***@127.0.0.1:1/15 is unreachable: ConnectionError: "
    )
    assert f"127.0.0.1:{REDIS_PORT}" not in failure.message and "broker" not in failure.message
    assert failure.message.endswith("(connect timeout 2.0 s)")
    assert failure.detail == {
        "result_backend": "redis://:***@127.0.0.1:1/15",
        "exception": "ConnectionError",
    }
    assert elapsed < 2.0


LATE_CONFIG_EXTRA = """
[tools.fails]
extensions = [["process"], [{ name = "celery", config = { timeout = 60 } }]]
"""


def _queued_ids(client: redis.Redis, queue: str) -> list[str]:
    import json

    return [json.loads(raw)["headers"]["id"] for raw in client.lrange(queue, 0, -1)]


def test_a_timed_out_call_never_runs_on_a_worker_started_later(tmp_path: Path) -> None:
    """Issue 12 item 4: a timed-out call does not run on a worker started after the timeout."""
    require_redis()
    text = CONFIG.read_text(encoding="utf-8")
    text = text.replace(
        '{ name = "celery", config = { timeout = 3 } }',
        '{ name = "celery", config = { timeout = 1 } }',
    )
    text = text.replace('[tools.fails]\nextensions = [["process"]]\n', "") + LATE_CONFIG_EXTRA
    config = copy_fixture(tmp_path, text)
    queue = f"late-{os.getpid()}"
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(queue)
    marker = tmp_path / "late"

    async def go() -> ToolResult:
        async with load_toolset(config) as toolset:
            return await toolset["sleepy_celery"].call(
                {"seconds": 0, "marker": str(marker), "queue": queue}
            )

    worker: Worker | None = None
    try:
        failure = failure_of(run(go()))
        assert failure.kind == "timeout"
        expired_id = failure.detail["task_id"]
        assert isinstance(expired_id, str)
        assert _queued_ids(client, queue) == [expired_id]  # no worker took it yet
        time.sleep(2.0)  # the worker starts well after the timeout
        worker = _start(tmp_path / "late.log", "--queue", queue, config=config)
        _wait_ready(worker)
        app = make_app(settings_from(tomllib.loads(text).get("backends")))
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and app.AsyncResult(expired_id).state == "PENDING":
                time.sleep(0.05)
            state = app.AsyncResult(expired_id).state
        finally:
            close_app(app)
        # The late worker received the task and discarded it: it had expired.
        assert state == "REVOKED", worker.log.read_text("utf-8")
        assert _queued_ids(client, queue) == []
        assert not Path(str(marker) + ".started").exists()  # the timed-out body never ran
    finally:
        if worker is not None:
            _stop([worker])
        client.delete(queue)
        client.close()


def test_a_worker_refuses_a_task_its_caller_marked_as_given_up(tmp_path: Path) -> None:
    """The revoke mark (set by a caller's timeout or cancel) holds for a later worker."""
    require_redis()
    text = CONFIG.read_text(encoding="utf-8")
    text = text.replace('[tools.fails]\nextensions = [["process"]]\n', "") + LATE_CONFIG_EXTRA
    config = copy_fixture(tmp_path, text)
    queue = f"marked-{os.getpid()}"
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(queue)
    worker: Worker | None = None

    async def go() -> ToolResult:
        nonlocal worker
        async with load_toolset(config) as toolset:
            call = asyncio.ensure_future(
                toolset["fails_celery"].call({"reason": "ran", "queue": queue})
            )
            deadline = time.monotonic() + 5
            while not client.llen(queue) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            (task_id,) = _queued_ids(client, queue)
            client.set(revoked_key(task_id), "1", ex=60)  # what the caller's _revoke writes
            worker = _start(tmp_path / "marked.log", "--queue", queue, config=config)
            return await call

    try:
        failure = failure_of(run(go()))
    finally:
        if worker is not None:
            _stop([worker])
        client.delete(queue)
        client.close()
    task_id = failure.detail["task_id"]
    assert (failure.kind, failure.where) == ("cancelled", "worker")  # not tool_error: not run
    assert failure.message == (
        f"celery task {task_id} was given up by its caller (timeout or cancel) before a "
        "worker started it; it was not run"
    )
