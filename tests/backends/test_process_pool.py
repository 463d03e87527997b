"""The process backend's pool: real worker processes, real crashes, real kills."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_support import CONFIG, alive, copy_fixture, pool_call, run, wait_file, wait_gone

from toolproof.backends.process import ProcessPool, describe_exit
from toolproof.backends.protocol import descriptor_digest
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolResult
from toolproof.errors import BackendError


async def _digests(config: Path) -> dict[str, str]:
    async with load_toolset(config) as toolset:
        return {name: descriptor_digest(toolset[name]) for name in toolset.names()}


DIGESTS = run(_digests(CONFIG))


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPool]:
    pool = ProcessPool(CONFIG, workers=2)
    yield pool
    pids = pool.pids()
    pool.close()
    assert wait_gone(pids) == []


def call(pool: ProcessPool, tool: str, arguments: dict[str, object], **kw: float) -> ToolResult:
    return run(pool_call(pool, tool, arguments, DIGESTS[tool], **kw))


def test_success_runs_in_a_worker_process(pool: ProcessPool) -> None:
    assert call(pool, "add", {"a": 2, "b": 40}).value == 42
    pid = call(pool, "whoami", {}).value
    assert isinstance(pid, int) and pid != os.getpid()
    assert pid in pool.pids()
    assert len(pool.pids()) == 2


def test_stdout_noise_does_not_break_the_channel(pool: ProcessPool) -> None:
    assert call(pool, "chatty", {"text": "still framed"}).value == "still framed"
    assert call(pool, "add", {"a": 1, "b": 1}).value == 2


def test_body_exception_is_a_tool_error(pool: ProcessPool) -> None:
    failure = call(pool, "fails", {"reason": "no stock"}).failure
    assert failure is not None
    assert (failure.kind, failure.where) == ("tool_error", "body")
    assert failure.message == "tool 'fails' raised ValueError: no stock"


def test_worker_exit_is_a_worker_failure_and_the_pool_replaces_it(pool: ProcessPool) -> None:
    before = pool.pids()
    result = call(pool, "crash", {"code": 7})
    failure = result.failure
    assert failure is not None
    assert (failure.kind, failure.where, failure.retryable) == ("worker", "worker", True)
    assert failure.detail["exit"] == "exit status 7"
    dead = failure.detail["pid"]
    assert isinstance(dead, int) and dead in before
    assert f"worker process {dead} died while running tool 'crash' (exit status 7" in (
        failure.message
    )
    assert not alive(dead)
    assert len(pool.pids()) == 2 and dead not in pool.pids()
    assert call(pool, "add", {"a": 1, "b": 2}).value == 3


def test_real_segfault_is_a_worker_failure(pool: ProcessPool) -> None:
    failure = call(pool, "segfault", {}).failure
    assert failure is not None
    assert (failure.kind, failure.where) == ("worker", "worker")
    assert failure.detail["exit"] == "killed by SIGSEGV"
    assert call(pool, "add", {"a": 5, "b": 5}).value == 10


def test_external_sigkill_reads_as_oom_kill(pool: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "m"

    async def go() -> ToolResult:
        task = asyncio.ensure_future(
            pool_call(pool, "sleepy", {"seconds": 30, "marker": str(marker)}, DIGESTS["sleepy"])
        )
        started = await asyncio.to_thread(wait_file, Path(str(marker) + ".started"))
        os.kill(int(started), signal.SIGKILL)
        return await task

    failure = run(go()).failure
    assert failure is not None
    assert failure.kind == "worker"
    assert failure.detail["exit"] == (
        "killed by SIGKILL (out of memory, or killed by another process)"
    )


def test_timeout_kills_a_blocking_body(pool: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "done"
    result = call(pool, "sleepy", {"seconds": 1.5, "marker": str(marker)}, timeout=0.5)
    failure = result.failure
    assert failure is not None
    assert (failure.kind, failure.where) == ("timeout", "worker")
    pid = failure.detail["pid"]
    assert failure.message == (
        f"tool 'sleepy' did not finish within 0.5 s: worker process {pid} was killed and replaced"
    )
    assert isinstance(pid, int) and not alive(pid)
    assert Path(str(marker) + ".started").read_text(encoding="utf-8") == str(pid)
    time.sleep(1.5)
    assert not marker.exists()  # the body really stopped: it never reached its last line


def test_cancelling_the_caller_kills_the_job(pool: ProcessPool, tmp_path: Path) -> None:
    marker = tmp_path / "job"

    async def go() -> int:
        task = asyncio.ensure_future(
            pool_call(pool, "sleepy", {"seconds": 1.5, "marker": str(marker)}, DIGESTS["sleepy"])
        )
        pid = int(await asyncio.to_thread(wait_file, Path(str(marker) + ".started")))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pid

    pid = run(go())
    assert wait_gone([pid], 2.0) == []
    assert pid not in pool.pids()
    time.sleep(1.6)
    assert not marker.exists()
    assert call(pool, "add", {"a": 1, "b": 2}).value == 3


def test_fifty_calls_in_flight_on_two_workers(pool: ProcessPool) -> None:
    async def go() -> list[ToolResult]:
        return await asyncio.gather(
            *(pool_call(pool, "add", {"a": i, "b": 1}, DIGESTS["add"]) for i in range(50))
        )

    assert [result.value for result in run(go())] == [i + 1 for i in range(50)]
    assert len(pool.pids()) == 2


def test_descriptor_mismatch_names_both_digests(tmp_path: Path) -> None:
    config = copy_fixture(tmp_path)
    tools = tmp_path / "backend_tools.py"
    tools.write_text(
        tools.read_text(encoding="utf-8").replace("Add two integers.", "Add two ints."), "utf-8"
    )
    pool = ProcessPool(config, workers=1)
    try:
        result = run(pool_call(pool, "add", {"a": 1, "b": 2}, DIGESTS["add"]))
    finally:
        pool.close()
    failure = result.failure
    assert failure is not None
    assert (failure.kind, failure.where) == ("descriptor_mismatch", "worker")
    worker = failure.detail["worker_descriptor"]
    assert failure.detail["caller_descriptor"] == DIGESTS["add"]
    assert isinstance(worker, str) and worker.startswith("sha256:") and worker != DIGESTS["add"]
    assert f"caller descriptor {DIGESTS['add']} differs from worker descriptor {worker}" in (
        failure.message
    )


def test_worker_that_cannot_build_the_toolset(tmp_path: Path) -> None:
    config = copy_fixture(tmp_path, '[[python]]\nmodule = "no_such_module_here"\n')
    pool = ProcessPool(config, workers=1)
    try:
        with pytest.raises(BackendError) as caught:
            run(pool.start())
        result = run(pool_call(pool, "add", {"a": 1, "b": 2}, "sha256:x"))
    finally:
        pool.close()
    assert "worker could not build the Toolset" in caught.value.message
    assert "cannot import module 'no_such_module_here'" in caught.value.message
    assert result.failure is not None and result.failure.kind == "backend"
    assert pool.pids() == []


def test_closed_pool_refuses_calls() -> None:
    pool = ProcessPool(CONFIG, workers=1)
    pool.close()
    failure = run(pool_call(pool, "add", {"a": 1, "b": 2}, DIGESTS["add"])).failure
    assert failure is not None
    assert (failure.kind, failure.where) == ("backend", "backend")
    assert failure.message == f"process pool for {CONFIG.resolve()} is closed"


def test_pool_refuses_to_start_inside_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLPROOF_WORKER", "1")
    pool = ProcessPool(CONFIG, workers=1)
    failure = run(pool_call(pool, "add", {"a": 1, "b": 2}, DIGESTS["add"])).failure
    assert failure is not None and failure.kind == "backend"
    assert failure.message == (
        "the process backend cannot start inside a toolproof worker "
        "(rule: a relocating backend runs on the caller's side)"
    )
    assert pool.pids() == []


def test_close_leaves_no_process_behind() -> None:
    async def go() -> tuple[ProcessPool, list[int]]:
        async with ProcessPool(CONFIG, workers=3) as pool:
            assert (await pool_call(pool, "add", {"a": 1, "b": 2}, DIGESTS["add"])).value == 3
            return pool, pool.pids()

    pool, pids = run(go())
    assert len(pids) == 3
    assert wait_gone(pids, 3.0) == []
    assert pool.pids() == []


CALLER = """
import asyncio, sys
from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import BackendRequest, descriptor_digest
from toolproof.config import load_toolset

async def main():
    async with load_toolset(sys.argv[1]) as toolset:
        pool = ProcessPool(sys.argv[1], workers=2)
        digest = descriptor_digest(toolset["add"])
        await pool.submit(BackendRequest("add", {"a": 1, "b": 2}, digest))
        print(" ".join(map(str, pool.pids())), flush=True)
        await asyncio.sleep(60)

asyncio.run(main())
"""


def test_caller_killed_with_sigkill_leaves_no_worker(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(CALLER, encoding="utf-8")
    caller = subprocess.Popen(
        [sys.executable, str(script), str(CONFIG)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert caller.stdout is not None
        pids = [int(pid) for pid in caller.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    finally:
        caller.kill()
        caller.wait()
        if caller.stdout is not None:
            caller.stdout.close()
    assert wait_gone(pids, 3.0) == []


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (3, "exit status 3"),
        (-11, "killed by SIGSEGV"),
        (-9, "killed by SIGKILL (out of memory, or killed by another process)"),
        (None, "still running"),
    ],
)
def test_describe_exit(code: int | None, text: str) -> None:
    assert describe_exit(code) == text
