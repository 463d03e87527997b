"""Resume (issue 34 point 3): a session SIGKILLed at call K, resumed, against frozen replay.

One command: ``python benchmarks/bench_resume.py [--calls N] [--kill-at K] [--repeat R]``
(default 10,000, 9,000 and 3).

1. A child process records a named session (``session_id="bench"``) of up to N calls
   of ``fetch(i)`` (read-only, a distinct 1,200-byte string) and SIGKILLs itself inside
   call K + 1 (its K calls recorded; the rest never made).
2. Another child runs the same agent with ``resume=True`` and prints the time from
   entering ``record_session`` to the agent asking call K + 1: the crashed live
   directory recovered into a run (finalized: its frozen re-execution and checks), the
   chain verified, and the K recorded calls served frozen (0 live calls).
3. A third child replays the recovered session frozen (``replay_session(head,
   chain=True)``: the chain verified, then the same K calls served) and prints its time.

With the default ``segment_calls`` (2,000) the kill at 9,000 comes while segment 4 awaits
its seal: two live segments are recovered.

Steps 2 and 3 run R times, alternating, each resume on its own copy of the crashed
artifact root (copied before the first resume, so every resume recovers the same live
directories). Printed: how many live segments the crash left, and the fastest of each
and their ratio, and the median of each resume's ratio to the replay of its own
recovered root (the issue's target: resume at most 1.2x frozen replay), twice: in
wall-clock seconds, and in the process's CPU seconds (``time.process_time``), which
other processes on a shared machine do not stretch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import toolproof

SESSION = "bench"


@toolproof.tool(read_only=True)
def fetch(i: int) -> str:
    """Return a distinct 1,200-byte document (dies inside call $BENCH_KILL_AT + 1)."""
    if i == int(os.environ.get("BENCH_KILL_AT", "-1")):
        os.kill(os.getpid(), signal.SIGKILL)
    return (f"document {i}: " + "lorem ipsum dolor sit amet " * 45)[:1200]


def _toolset() -> toolproof.Toolset:
    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(fetch))
    return toolset.seal()


async def _record(root: Path, calls: int) -> None:
    async with toolproof.record_session(
        _toolset(), root=root, task="bench", session_id=SESSION
    ) as session:
        for i in range(calls):
            await session.call("fetch", {"i": i})


async def _resume(root: Path, kill_at: int) -> None:
    began, cpu = time.perf_counter(), time.process_time()
    async with toolproof.record_session(
        _toolset(), root=root, task="bench", session_id=SESSION, resume=True
    ) as session:
        for i in range(kill_at):
            await session.call("fetch", {"i": i})
        reached = time.perf_counter() - began  # the agent now asks call kill_at + 1
        used = time.process_time() - cpu
        assert session.live_calls == 0
    print(json.dumps({"seconds": reached, "cpu": used, "run_ids": session.run_ids}))


async def _replay(run: Path, kill_at: int) -> None:
    async def agent(session: toolproof.Session) -> None:
        for i in range(kill_at):
            await session.call("fetch", {"i": i})

    began, cpu = time.perf_counter(), time.process_time()
    replayed = await toolproof.replay_session(run, agent, chain=True)
    seconds, used = time.perf_counter() - began, time.process_time() - cpu
    assert (replayed.calls, replayed.live_calls) == (kill_at, 0)
    print(json.dumps({"seconds": seconds, "cpu": used}))


def _child(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, __file__, "--child", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )


def main() -> None:
    """Run the three children and print the figures (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--kill-at", type=int, default=9_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, where, count = args.child
        if what == "record":
            asyncio.run(_record(Path(where), int(count)))
        elif what == "resume":
            asyncio.run(_resume(Path(where), int(count)))
        else:
            asyncio.run(_replay(Path(where), int(count)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        crashed = Path(tmp) / "crashed"
        killed = _child(
            "record", str(crashed), str(args.calls), env={"BENCH_KILL_AT": str(args.kill_at)}
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        live = len(list((crashed / "sessions").iterdir()))
        resumes: list[dict[str, float]] = []
        replays: list[dict[str, float]] = []
        for attempt in range(args.repeat):
            root = Path(tmp) / f"resume-{attempt}"
            shutil.copytree(crashed, root)
            resumed = _child("resume", str(root), str(args.kill_at))
            assert resumed.returncode == 0, resumed.stderr
            resume = json.loads(resumed.stdout)
            resumes.append(resume)
            recovered = root / "runs" / resume["run_ids"][-1]  # the agent stopped: no new segment
            replayed = _child("replay", str(recovered), str(args.kill_at))
            assert replayed.returncode == 0, replayed.stderr
            replays.append(json.loads(replayed.stdout))
    print(
        f"{args.kill_at} recorded calls (SIGKILLed in call {args.kill_at + 1} of "
        f"{args.calls}; {live} live segments recovered), fastest of {args.repeat}:"
    )
    for clock, what in (("seconds", "wall-clock"), ("cpu", "CPU")):
        resumed_in = min(run[clock] for run in resumes)
        replayed_in = min(run[clock] for run in replays)
        pairs = zip(resumes, replays, strict=True)
        paired = [resume[clock] / replay[clock] for resume, replay in pairs]
        print(
            f"  {what}: resume to call {args.kill_at + 1} {resumed_in:.2f} s, frozen replay "
            f"of the same calls {replayed_in:.2f} s, ratio {resumed_in / replayed_in:.2f}x; "
            f"median of each resume over the replay of its own root "
            f"{statistics.median(paired):.2f}x (target <= 1.2x)"
        )


if __name__ == "__main__":
    main()
