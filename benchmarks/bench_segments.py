"""Segments (issue 31 points 1 and 4): a session of N calls sealed into runs while it records.

One command: ``python benchmarks/bench_segments.py [--calls N ...] [--segment-calls S]``
(default ``--calls 5000 50000``, ``--segment-calls`` the default of ``record_session``,
2000; ``0``: one run, the figures before segments).

For each N, in a child process: ``toolproof.record_session`` over one async tool,
``fetch(i)`` (a distinct 1,200-byte string), N calls one after the other. Printed: the
time per call while recording (sealing goes on in the background meanwhile), the time
the end of the block took (sealing what was left), the child's peak RSS (``ru_maxrss``:
recording and every seal together) and CPU seconds; then ``toolproof verify HEAD
--chain`` (every segment, one at a time) in a child of its own: its time, CPU and peak
RSS; and ``toolproof replay HEAD --agent bench_segments:agent --chain`` (the chain
verified, then the agent's N calls served frozen from segment 1 to the head, one segment
in memory at a time) in another: its time, CPU and peak RSS. With segments, finalizing
is spread over the session (the end of the block seals what was left, at most two
segments and the open one); compare the end's time with ``segment_calls=0`` (one run
finalized at the end) and the process's CPU with the chain's verify. Targets (issue 31):
peak RSS < 256 MB whatever N (the replay's too); finalize <= 2x verify.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import toolproof
from toolproof.contract.bounds import DEFAULT_SEGMENT_CALLS

MB = 2**20
CALLS_ENV = "BENCH_SEGMENTS_CALLS"


def fetch(i: int) -> str:
    """Return a distinct 1,200-byte document."""
    return (f"document {i}: " + "lorem ipsum dolor sit amet " * 45)[:1200]


async def agent(session: toolproof.Session) -> None:
    """The recorded agent: N calls of ``fetch`` (N: $BENCH_SEGMENTS_CALLS); replayed by --agent."""
    for i in range(int(os.environ[CALLS_ENV])):
        await session.call("fetch", {"i": i})


async def _record(root: Path, calls: int, segment_calls: int) -> dict[str, Any]:
    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(fetch))
    toolset.seal()
    began, began_cpu = time.perf_counter(), time.process_time()
    async with toolproof.record_session(
        toolset, root=root, task="scale", segment_calls=segment_calls
    ) as session:
        await agent(session)
        ended, ended_cpu = time.perf_counter(), time.process_time()
    done, done_cpu = time.perf_counter(), time.process_time()
    return {
        "run_ids": session.run_ids,
        "record_s": ended - began,
        "record_cpu": ended_cpu - began_cpu,
        "end_s": done - ended,
        "end_cpu": done_cpu - ended_cpu,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _child(argv: list[str], calls: int) -> tuple[float, float, int, bytes]:
    """Run ``argv`` (here, N calls); its wall seconds, CPU seconds, peak RSS (bytes), stdout."""
    began = time.perf_counter()
    env = {**os.environ, CALLS_ENV: str(calls)}
    here = Path(__file__).parent  # --agent bench_segments:agent imports from the working dir
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=here)
    out = process.stdout.read() if process.stdout is not None else b""
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise SystemExit(f"bench_segments: {argv[1:3]} failed ({status})")
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - began, cpu, usage.ru_maxrss * 1024, out


def measure(root: Path, calls: int, segment_calls: int) -> None:
    """Print one N's figures."""
    base = root / f"calls-{calls}"
    base.mkdir()
    child = [sys.executable, __file__, "--record-child", str(calls), str(base), str(segment_calls)]
    _, cpu, peak, out = _child(child, calls)
    rec = json.loads(out)
    head = base / "runs" / rec["run_ids"][-1]
    cli = "from toolproof.adapters.cli import main; main()"
    verify = [sys.executable, "-c", cli, "verify", str(head), "--chain"]
    verify_s, verify_cpu, verify_peak, _ = _child([*verify, "--json"], calls)
    replay = [sys.executable, "-c", cli, "replay", str(head), "--agent", "bench_segments:agent"]
    replay_s, replay_cpu, replay_peak, out = _child([*replay, "--chain", "--json"], calls)
    replayed = json.loads(out)
    shutil.rmtree(base)
    segments = len(rec["run_ids"])
    print(f"\n{calls} calls, segment_calls={segment_calls}: {segments} runs")
    print(f"  record     {rec['record_s'] / calls * 1e6:8.1f} us/call (sealing meanwhile)")
    print(f"  end        {rec['end_s']:8.2f} s wall, {rec['end_cpu']:.2f} s CPU (what was left)")
    print(
        f"  process    {cpu:8.2f} s CPU, peak RSS {peak / MB:.0f} MB (< 256 MB: {peak < 256 * MB})"
    )
    print(
        f"  verify --chain {verify_s:6.2f} s wall, {verify_cpu:.2f} s CPU, "
        f"peak RSS {verify_peak / MB:.0f} MB"
    )
    print(
        f"  replay --agent --chain {replay_s:6.2f} s wall, {replay_cpu:.2f} s CPU, peak RSS "
        f"{replay_peak / MB:.0f} MB ({replayed['calls']} calls served from "
        f"{replayed['segments']} run(s), {replayed['live_calls']} live calls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[5000, 50000])
    parser.add_argument("--segment-calls", type=int, default=DEFAULT_SEGMENT_CALLS)
    parser.add_argument("--record-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record_child:
        calls, root, segment_calls = args.record_child
        result = asyncio.run(_record(Path(root), int(calls), int(segment_calls)))
        print(json.dumps(result))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-segments-"))
    try:
        for calls in args.calls:
            measure(root, calls, args.segment_calls)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
