"""Instructions per recorded tool call, and per unrecorded call (callgrind).

One command: ``python benchmarks/count_calls.py [--calls N]`` (needs ``valgrind``).

The calls of ``bench_session.py`` (the ``echo`` tool of ``bench_recorder.py`` through
``Session.call`` of a live session with group commit, and the same tool called
unrecorded, ``await tool.call(args)``), counted in instructions instead of timed: a
count is repeatable on a loaded, shared machine where microseconds are not. Each count
is one ``valgrind --tool=callgrind`` child that opens a live session and makes
``N + 100`` calls, the first ``k`` through the session and the rest unrecorded; per
call: ``(count(k = N + 100) - count(k = 100)) / N`` is the recording overhead (both
children warm, the first 100 calls are recorded in both), and a third child making
only the 100 recorded calls gives the unrecorded call's own count, the anchor. The
group syncer runs one batch at the first commit and one at close. Callgrind counts
user space only (not the kernel's time in ``write(2)``), so read it next to the
``bench_session.py`` figures, not instead of them.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_session import _session
from callgrind import instructions

from toolproof.runs.recorder import Durability

WARM = 100


async def child(recorded: int, total: int, root: Path) -> None:
    """Make ``total`` calls, the first ``recorded`` of them through the live session."""
    session = _session(root, Durability.GROUP)
    assert session._live is not None and session._live.recorder._sync is not None
    session._live.recorder._sync._interval = 3600.0
    assert session._toolset is not None
    tool = session._toolset["echo"]
    for n in range(total):
        if n < recorded:
            await session.call("echo", {"n": n})
        else:
            await tool.call({"n": n})
    session._live.close()


def count(recorded: int, total: int) -> int:
    """Instructions callgrind counts for one child."""
    return instructions(__file__, "--child", "--recorded", str(recorded), "--calls", str(total))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls counted")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--recorded", type=int, default=0, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        with tempfile.TemporaryDirectory(prefix="count-calls-") as tmp:
            asyncio.run(child(options.recorded, options.calls, Path(tmp)))
        return 0
    total = options.calls + WARM
    # a native child first writes the bytecode caches
    subprocess.run(
        [sys.executable, __file__, "--child", "--recorded", "1", "--calls", "2"], check=True
    )
    recorded_all = count(total, total)
    recorded_warm = count(WARM, total)
    warm_only = count(WARM, WARM)
    overhead = (recorded_all - recorded_warm) / options.calls
    unrecorded = (recorded_warm - warm_only) / options.calls
    print(f"{'tool call':24} {'instructions/call':>18}")
    print(f"{'unrecorded (anchor)':24} {unrecorded:18.0f}")
    print(f"{'recording overhead':24} {overhead:18.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
