"""The process backend contains what a body starts: forks, double forks, new sessions.

Real worker processes, real forks, real signals (issue 12 item 2): a body's children
cannot hide the worker's death, and a timeout, a cancel, a pool close, a worker crash
or the death of the caller ends every process the body started.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from backend_support import CONFIG, alive, pool_call, run, wait_file, wait_gone

from toolproof.backends.containment import Cell, descendants, kill_tree, tagged
from toolproof.backends.process import WORKER_MODULE, ProcessPool
from toolproof.backends.protocol import MAX_FRAME, FrameReader, descriptor_digest
from toolproof.backends.worker import PARENT_ENV, WORKER_ENV
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolResult


async def _digests(config: Path) -> dict[str, str]:
    async with load_toolset(config) as toolset:
        return {name: descriptor_digest(toolset[name]) for name in toolset.names()}


DIGESTS = run(_digests(CONFIG))


def call(pool: ProcessPool, tool: str, arguments: dict[str, object], **kw: float) -> ToolResult:
    return run(pool_call(pool, tool, arguments, DIGESTS[tool], **kw))


def sleeper(pool: ProcessPool, **arguments: object) -> int:
    pid = call(pool, "spawn_sleeper", arguments).value
    assert isinstance(pid, int) and alive(pid)
    return pid


CELLS = pytest.mark.parametrize("use_cgroup", [True, False], ids=["cgroup", "tree+tag"])
DETACH = pytest.mark.parametrize("detach", [False, True], ids=["fork", "double-fork+setsid"])


@CELLS
@DETACH
def test_close_kills_what_a_body_left_running(detach: bool, use_cgroup: bool) -> None:
    pool = ProcessPool(CONFIG, workers=1, use_cgroup=use_cgroup)
    try:
        child = sleeper(pool, detach=detach)
        worker = pool.pids()[0]
        assert child in descendants(worker)  # the worker is a subreaper: orphans stay below it
    finally:
        pool.close()
    assert wait_gone([child, worker], 3.0) == []


@CELLS
def test_a_forked_child_does_not_hide_a_worker_segfault(use_cgroup: bool) -> None:
    pool = ProcessPool(CONFIG, workers=1, use_cgroup=use_cgroup)
    try:
        child = sleeper(pool)
        (worker,) = pool.pids()

        async def go() -> ToolResult:
            task = asyncio.ensure_future(
                pool_call(pool, "sleepy", {"seconds": 30}, DIGESTS["sleepy"], timeout=20)
            )
            await asyncio.sleep(0.3)
            os.kill(worker, signal.SIGSEGV)
            return await task

        failure = run(go()).failure
        assert failure is not None
        # Not "timeout" (20 s, before the body's 30 s): the death itself ended the call.
        assert (failure.kind, failure.where) == ("worker", "worker")
        assert failure.detail["exit"] == "killed by SIGSEGV"
        assert wait_gone([child], 3.0) == []  # the crashed worker's child went with it
        assert call(pool, "add", {"a": 1, "b": 2}).value == 3
    finally:
        pool.close()


@CELLS
@DETACH
def test_timeout_kills_every_process_the_body_started(
    detach: bool, use_cgroup: bool, tmp_path: Path
) -> None:
    pool = ProcessPool(CONFIG, workers=1, use_cgroup=use_cgroup)
    marker = tmp_path / "pid"
    try:

        async def go() -> tuple[ToolResult, list[int]]:
            task = asyncio.ensure_future(
                pool_call(
                    pool,
                    "spawn_sleeper",
                    {"detach": detach, "then_sleep": 30, "marker": str(marker)},
                    DIGESTS["spawn_sleeper"],
                    timeout=3,
                )
            )
            child = int(await asyncio.to_thread(wait_file, marker))
            (worker,) = pool.pids()
            assert child in descendants(worker)
            return await task, [worker, child]

        result, pids = run(go())
        assert result.failure is not None and result.failure.kind == "timeout"
        assert wait_gone(pids, 3.0) == []
    finally:
        pool.close()


@CELLS
def test_cancel_kills_a_detached_grandchild(use_cgroup: bool, tmp_path: Path) -> None:
    pool = ProcessPool(CONFIG, workers=1, use_cgroup=use_cgroup)
    marker = tmp_path / "pid"
    try:

        async def go() -> list[int]:
            task = asyncio.ensure_future(
                pool_call(
                    pool,
                    "spawn_sleeper",
                    {"detach": True, "then_sleep": 30, "marker": str(marker)},
                    DIGESTS["spawn_sleeper"],
                )
            )
            child = int(await asyncio.to_thread(wait_file, marker))
            (worker,) = pool.pids()
            pids = [worker, child]
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return pids

        pids = run(go())
        assert wait_gone(pids, 3.0) == []
    finally:
        pool.close()


def test_idle_worker_that_died_is_replaced_and_the_next_call_runs() -> None:
    pool = ProcessPool(CONFIG, workers=1)
    try:
        assert call(pool, "add", {"a": 1, "b": 1}).value == 2
        (worker,) = pool.pids()
        os.kill(worker, signal.SIGKILL)
        assert wait_gone([worker], 3.0) == []
        result = call(pool, "add", {"a": 1, "b": 2})
        assert result.failure is None
        assert result.value == 3
        assert worker not in pool.pids() and len(pool.pids()) == 1
    finally:
        pool.close()


def test_a_worker_killed_just_before_a_call_never_fails_that_call() -> None:
    # The pool cannot see the death yet (not reaped, pidfd not ready): the request
    # goes to a dead worker, which never reads it, so the call runs on a fresh one.
    pool = ProcessPool(CONFIG, workers=1)
    try:
        assert call(pool, "add", {"a": 0, "b": 0}).value == 0
        values = []
        for n in range(8):
            (worker,) = pool.pids()
            os.kill(worker, signal.SIGKILL)
            result = call(pool, "add", {"a": n, "b": 1})
            assert result.failure is None, result.failure
            values.append(result.value)
            assert worker not in pool.pids()
        assert values == [1, 2, 3, 4, 5, 6, 7, 8]
    finally:
        pool.close()


def test_result_over_the_frame_limit_is_an_invalid_result() -> None:
    pool = ProcessPool(CONFIG, workers=1, max_result_bytes=4096)
    try:
        assert call(pool, "big", {"size": 100}).value == "x" * 100
        (worker,) = pool.pids()
        failure = call(pool, "big", {"size": 5000}).failure
        assert failure is not None
        assert (failure.kind, failure.where) == ("invalid_result", "output")
        assert failure.message == (
            "tool 'big' returned 5056 bytes of JSON, over the process backend's result "
            "limit of 4096 bytes (max_result_bytes)"
        )
        assert failure.detail["limit_bytes"] == 4096
        assert pool.pids() == [worker]  # not a worker death: the same worker goes on
        assert call(pool, "add", {"a": 2, "b": 2}).value == 4
    finally:
        pool.close()


def test_max_result_bytes_is_bounded_by_the_frame_limit() -> None:
    with pytest.raises(ValueError, match=f"between 1 and {MAX_FRAME}, not 0"):
        ProcessPool(CONFIG, max_result_bytes=0)


CALLER = """
import asyncio, sys
from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import BackendRequest, descriptor_digest
from toolproof.config import load_toolset

async def main():
    async with load_toolset(sys.argv[1]) as toolset:
        pool = ProcessPool(sys.argv[1], workers=2, use_cgroup=sys.argv[2] == "1")
        digest = descriptor_digest(toolset["spawn_sleeper"])
        first = await pool.submit(BackendRequest("spawn_sleeper", {"detach": True}, digest))
        second = await pool.submit(BackendRequest("spawn_sleeper", {}, digest))
        pids = [*pool.pids(), first.value, second.value]
        print(" ".join(map(str, pids)), flush=True)
        await asyncio.sleep(60)

asyncio.run(main())
"""


@CELLS
def test_caller_killed_with_sigkill_takes_workers_and_grandchildren(
    use_cgroup: bool, tmp_path: Path
) -> None:
    script = tmp_path / "caller.py"
    script.write_text(CALLER, encoding="utf-8")
    caller = subprocess.Popen(
        [sys.executable, str(script), str(CONFIG), "1" if use_cgroup else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert caller.stdout is not None
        pids = [int(pid) for pid in caller.stdout.readline().split()]
        assert len(pids) == 4 and all(alive(pid) for pid in pids)
    finally:
        caller.kill()
        caller.wait()
        if caller.stdout is not None:
            caller.stdout.close()
    assert wait_gone(pids, 3.0) == []


RUNAWAY = """
import os, sys, time
sys.stdout.write(str(os.getpid()) + "\\n"); sys.stdout.flush()
if sys.stdin.readline() != "go\\n":  # the test moves this process into its cell first
    sys.exit(0)
deadline = time.monotonic() + 30  # bounded even if it escaped (monotonic: shared by all links)
while time.monotonic() < deadline:  # a moving target: fork, the child goes on in a new session
    time.sleep(0.002)
    try:
        child = os.fork()
    except OSError:  # EAGAIN on a loaded host: this link goes on and forks again
        continue
    if child == 0:
        os.setsid()
    else:
        os._exit(0)
"""


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds; False if it does not within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


FORKING_TREE = """
import os, sys, time
sys.stdout.write(str(os.getpid()) + "\\n"); sys.stdout.flush()
for _ in range(200):  # keep starting detached children (each one sleeps, never forks)
    time.sleep(0.05)
    if os.fork() == 0:
        os.setsid()
        time.sleep(30)
        os._exit(0)
"""


def require_cgroup(cell: Cell) -> None:
    """Skip where the host gives no writable cgroup v2, except under ``CI=true``."""
    if cell.kind != "cgroup":
        message = "no writable cgroup v2 hierarchy with cgroup.kill on this host"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: the containment test must run)")
        pytest.skip(message)


def test_a_cgroup_cell_kills_a_process_that_keeps_forking_away() -> None:
    cell = Cell()
    require_cgroup(cell)
    env = dict(os.environ, **cell.environment())
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNAWAY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        root = int(proc.stdout.readline())  # it forks nothing until it reads "go"
        cell.enter(root)
        assert cell.cgroup is not None  # the move was made and checked
        proc.stdin.write("go\n")
        proc.stdin.flush()
        procs = cell.cgroup / "cgroup.procs"

        def members() -> list[str]:
            return procs.read_text(encoding="ascii").split()

        # The chain runs inside the cell, on pids other than the root's.
        assert wait_until(lambda: members() != [] and str(root) not in members()), members()
        cell.kill(None)
        assert wait_until(lambda: members() == []), members()
        assert tagged(cell.tag) == set()
    finally:
        proc.stdin.close()
        proc.wait(timeout=5)
        cell.close()
        proc.stdout.close()
    assert cell.cgroup is None


def test_entering_the_pid_of_a_process_that_already_exited_falls_back_to_tree_and_tag() -> None:
    # The kernel takes a zombie's pid into cgroup.procs without moving anything (what
    # it forked before it exited stays outside), so the move is checked.
    cell = Cell()
    require_cgroup(cell)
    path = cell.cgroup
    assert path is not None
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert wait_until(lambda: not alive(proc.pid))  # a zombie: it is not reaped yet
        cell.enter(proc.pid)
        assert (cell.kind, cell.cgroup, path.exists()) == ("tree+tag", None, False)
    finally:
        proc.wait(timeout=5)
        cell.close()


def test_a_worker_joins_its_cell_itself_before_it_builds_its_toolset() -> None:
    # No Cell.enter here: the worker's own move is what puts it in its cgroup.
    cell = Cell()
    require_cgroup(cell)
    assert cell.cgroup is not None
    env = dict(os.environ, **cell.environment(), **{PARENT_ENV: str(os.getpid())})
    env.pop(WORKER_ENV, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE, "--config", str(CONFIG)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        reader = FrameReader()
        frames: list[bytes] = []
        while not frames:
            chunk = proc.stdout.read1(1 << 16)
            assert chunk, "the worker ended before its hello"
            frames = reader.feed(chunk)
        assert "toolset" in json.loads(frames[0])  # it built its Toolset
        members = (cell.cgroup / "cgroup.procs").read_text(encoding="ascii").split()
        assert members == [str(proc.pid)]
    finally:
        proc.stdin.close()  # end of file: the worker ends
        proc.wait(timeout=10)
        proc.stdout.close()
        cell.close()


def test_kill_tree_stops_a_forking_tree_before_killing_it() -> None:
    env = dict(os.environ, TOOLPROOF_WORKER_TAG="kill-tree-test")
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKING_TREE], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        root = int(proc.stdout.readline())
        time.sleep(0.5)
        found = tagged("kill-tree-test")
        assert len(found) >= 3
        killed = kill_tree(root, "kill-tree-test")
        assert root in killed and found <= killed | {root}
        assert wait_gone(sorted(killed), 3.0) == []
        assert {pid for pid in tagged("kill-tree-test") if alive(pid)} == set()
    finally:
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


PARENT_OF_SLEEPER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
sys.stdout.write(str(child.pid) + "\\n"); sys.stdout.flush()
time.sleep(30)
"""


def test_kill_tree_never_signals_a_process_that_took_over_the_roots_pid() -> None:
    # The root is named by its pidfd too: once the root is reaped, whatever process
    # holds that pid (here a live stand-in with a child) is not the root's tree.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    pidfd = os.pidfd_open(gone.pid)
    gone.wait()
    stranger = subprocess.Popen(
        [sys.executable, "-c", PARENT_OF_SLEEPER], stdout=subprocess.PIPE, text=True
    )
    assert stranger.stdout is not None
    try:
        child = int(stranger.stdout.readline())
        assert kill_tree(stranger.pid, None, root_pidfd=pidfd) == set()
        assert alive(stranger.pid) and alive(child)
        assert descendants(stranger.pid) == {child}
    finally:
        os.close(pidfd)
        killed = kill_tree(stranger.pid, None)  # its own pid (no pidfd given): its tree
        stranger.wait(timeout=5)
        stranger.stdout.close()
    assert killed == {stranger.pid, child}
    assert wait_gone([child], 3.0) == []
