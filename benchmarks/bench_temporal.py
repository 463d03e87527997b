"""The temporal backend's per-call latency against a bare Temporal activity, same run, warm.

One command: ``python benchmarks/bench_temporal.py [--calls N] [--address HOST:PORT]``.

The server is ``--address``, else ``$TOOLPROOF_TEMPORAL_ADDRESS``, else the one
``.ci/services`` starts (127.0.0.1:8036); when none answers, a ``temporal server
start-dev --headless`` from ``.ci-cache/temporal-venv`` on a free port.

* toolproof: ``await toolset["add_temporal"].call({"a": 1, "b": 2})`` served by
  ``toolproof worker --config FILE --engine temporal --concurrency 100`` (its own task
  queue; 100 activity slots, as the bare worker's ``temporalio`` default: with
  ``--concurrency 2`` each call took about 50 ms more on the dev server);
* bare: ``await client.execute_workflow(...)`` of a one-activity workflow running
  ``add(1, 2)``, served by a plain ``temporalio`` worker in another process (its own
  task queue): the same shape (one workflow, one activity) without toolproof.

Samples alternate call by call (bare, toolproof, ...) in 5 blocks; the ratio reported
is the median of the 5 per-block median ratios. Printed: median and p99 round trip
and that ratio. Target (issue 34): ratio <= 1.2; the script exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.client import Client

TARGET = 1.2
BLOCKS = 5
ROOT = Path(__file__).resolve().parents[1]

TOOLS = '''
import toolproof

@toolproof.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

BARE_FLOW = """
from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.add")
async def add(a: int, b: int) -> int:
    return a + b


@workflow.defn(name="bench.call")
class Call:
    @workflow.run
    async def run(self, a: int, b: int) -> int:
        return await workflow.execute_activity(
            "bench.add", args=[a, b], start_to_close_timeout=timedelta(seconds=60),
            result_type=int)
"""

BARE = """
import asyncio, sys

from temporalio.client import Client
from temporalio.worker import Worker

from bare_flow import Call, add


async def main() -> None:
    client = await Client.connect(sys.argv[1])
    async with Worker(client, task_queue=sys.argv[2], workflows=[Call], activities=[add]):
        print("bare worker: ready", flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except (OSError, ValueError):
        return False


def _server(address: str | None, started: list[subprocess.Popen[bytes]]) -> str:
    for candidate in (address, os.environ.get("TOOLPROOF_TEMPORAL_ADDRESS"), "127.0.0.1:8036"):
        if candidate and _answers(candidate):
            return candidate
    cli = ROOT / ".ci-cache" / "temporal-venv" / "bin" / "temporal"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [str(cli), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    started.append(subprocess.Popen([*args, "--port", str(port)], stdout=subprocess.DEVNULL))
    target = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not _answers(target):
        if time.monotonic() > deadline:
            raise SystemExit(f"no Temporal server on {target}")
        time.sleep(0.1)
    return target


def _ready(process: subprocess.Popen[bytes], log: Path, marker: bytes) -> None:
    deadline = time.monotonic() + 60
    while marker not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker did not start:\n{log.read_text('utf-8')}")
        time.sleep(0.05)


def _p99(samples: list[float]) -> float:
    return sorted(samples)[max(0, round(0.99 * len(samples)) - 1)]


async def _measure(config: Path, address: str, bare_queue: str, calls: int) -> float:
    from toolproof.config import load_toolset

    client = await Client.connect(address)
    async with load_toolset(config) as toolset:
        tool = toolset["add_temporal"]

        async def ours() -> None:
            result = await tool.call({"a": 1, "b": 2})
            assert result.value == 3, result

        async def bare() -> None:
            value = await client.execute_workflow(
                "bench.call", args=[1, 2], id=f"bench-{uuid.uuid4()}", task_queue=bare_queue
            )
            assert value == 3

        for _ in range(20):  # warm both paths
            await bare()
            await ours()
        ratios: list[float] = []
        all_ours: list[float] = []
        all_bare: list[float] = []
        for _ in range(BLOCKS):
            mine: list[float] = []
            theirs: list[float] = []
            for _ in range(calls // BLOCKS):
                began = time.perf_counter()
                await bare()
                theirs.append(time.perf_counter() - began)
                began = time.perf_counter()
                await ours()
                mine.append(time.perf_counter() - began)
            ratios.append(statistics.median(mine) / statistics.median(theirs))
            all_ours += mine
            all_bare += theirs
    ratio = statistics.median(ratios)
    for name, samples in (("bare temporal", all_bare), ("toolproof temporal", all_ours)):
        print(
            f"{name:>20}: median {statistics.median(samples) * 1000:.2f} ms, "
            f"p99 {_p99(samples) * 1000:.2f} ms ({len(samples)} calls)"
        )
    print(f"{'ratio':>20}: {ratio:.3f} (median of {BLOCKS} block ratios; target <= {TARGET})")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--address", default=None)
    options = parser.parse_args()
    started: list[subprocess.Popen[bytes]] = []
    workers: list[subprocess.Popen[bytes]] = []
    try:
        address = _server(options.address, started)
        folder = Path(tempfile.mkdtemp(prefix="bench-temporal-"))
        (folder / "bench_tools.py").write_text(TOOLS, encoding="utf-8")
        # the workflow in a module of its own: the sandbox re-imports a workflow's module
        (folder / "bare_flow.py").write_text(BARE_FLOW, encoding="utf-8")
        (folder / "bare_worker.py").write_text(BARE, encoding="utf-8")
        queue, bare_queue = f"bench-tp-{uuid.uuid4()}", f"bench-bare-{uuid.uuid4()}"
        config = folder / "toolproof.toml"
        config.write_text(
            '[[python]]\nmodule = "bench_tools"\n\n[tools.add]\nextensions = [["temporal"]]\n\n'
            f'[backends.temporal]\naddress = "{address}"\ntask_queue = "{queue}"\n',
            encoding="utf-8",
        )
        cli = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
        for log, argv, marker in (
            (
                folder / "tp.log",
                [
                    *cli,
                    "worker",
                    "--config",
                    str(config),
                    "--engine",
                    "temporal",
                    "--concurrency",
                    "100",
                ],
                b"toolproof worker:",
            ),
            (
                folder / "bare.log",
                [sys.executable, str(folder / "bare_worker.py"), address, bare_queue],
                b"bare worker: ready",
            ),
        ):
            with log.open("wb") as handle:
                workers.append(subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT))
            _ready(workers[-1], log, marker)
        ratio = asyncio.run(_measure(config, address, bare_queue, options.calls))
        return 0 if ratio <= TARGET else 1
    finally:
        for process in [*workers, *started]:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


if __name__ == "__main__":
    raise SystemExit(main())
