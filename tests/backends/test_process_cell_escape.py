"""A body running as root that leaves its cgroup cell still dies with it (issue 30 item 11).

As root a body can write its pid to the root ``cgroup.procs`` (no cgroup namespace
stops that without ``nsdelegate``): ``cgroup.kill`` on the cell then misses it. The
cell's second net, the subreaper tree and the environment tag, still finds and kills
it, on a timeout, a cancel and a pool close. Real workers, a real cgroup v2, real
escapes: the test runs where the pool gets a cgroup cell (as root; CI runs as root).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_support import CONFIG, alive, pool_call, run, wait_file, wait_gone

from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import descriptor_digest
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolResult


async def _digests() -> dict[str, str]:
    async with load_toolset(CONFIG) as toolset:
        return {name: descriptor_digest(toolset[name]) for name in ("add", "escape_cell")}


DIGESTS = run(_digests())
DIGEST = DIGESTS["escape_cell"]


def cgroup_of(pid: int) -> str:
    """The cgroup v2 path of ``pid`` (the ``0::`` line of ``/proc/<pid>/cgroup``)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text(encoding="ascii").splitlines()
    return next(line[3:] for line in lines if line.startswith("0::"))


@pytest.fixture
def pool() -> Iterator[ProcessPool]:
    made = ProcessPool(CONFIG, workers=1, use_cgroup=True)
    try:
        assert run(pool_call(made, "add", {"a": 1, "b": 2}, DIGESTS["add"])).value == 3
        (worker,) = made.pids()  # started (a pool starts its workers on first use)
        if not cgroup_of(worker).rsplit("/", 1)[-1].startswith("toolproof-"):
            message = "the pool got no cgroup cell here (needs root and a writable cgroup v2)"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message + " (CI=true: the containment test must run)")
            pytest.skip(message)
        yield made
    finally:
        made.close()


MOVES = pytest.mark.parametrize("move", ["self", "child"], ids=["worker-left", "child-left"])


@MOVES
def test_a_timeout_kills_a_process_that_left_the_cell_for_the_root_cgroup(
    pool: ProcessPool, move: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pid"
    (worker,) = pool.pids()
    cell = cgroup_of(worker)
    sleeper: list[int] = []

    async def go() -> ToolResult:
        task = asyncio.ensure_future(
            pool_call(
                pool,
                "escape_cell",
                {"move": move, "then_sleep": 30, "marker": str(marker)},
                DIGEST,
                timeout=3,
            )
        )
        sleeper.append(int(await asyncio.to_thread(wait_file, marker)))
        return await task

    try:
        result = run(go())
        assert result.failure is not None and result.failure.kind == "timeout"
        assert wait_gone([sleeper[0], worker], 3.0) == []
    finally:
        for pid in sleeper:
            if alive(pid):
                os.kill(pid, 9)
    assert cell.rsplit("/", 1)[-1].startswith("toolproof-")


@MOVES
def test_closing_the_pool_kills_a_process_that_left_the_cell(pool: ProcessPool, move: str) -> None:
    (worker,) = pool.pids()
    result = run(pool_call(pool, "escape_cell", {"move": move}, DIGEST))
    assert result.failure is None and isinstance(result.value, int)
    sleeper = result.value
    try:
        assert alive(sleeper)
        assert cgroup_of(sleeper) == "/"  # it really left: the root cgroup, not the cell
        assert (cgroup_of(worker) == "/") is (move == "self")
        pool.close()
        assert wait_gone([sleeper, worker], 3.0) == []
    finally:
        if alive(sleeper):
            os.kill(sleeper, 9)
