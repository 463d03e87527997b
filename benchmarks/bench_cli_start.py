"""The command line's start (issue 31): CPU time of ``toolproof`` before it does any work.

One command: ``python benchmarks/bench_cli_start.py [--run RUN] [--src DIR] [--rounds N]``.

Each line is a fresh ``python -m toolproof ...`` process, run ``--rounds`` times (10 by
default), its median CPU seconds (user + system of the child, from ``os.wait4``: the
shared machine's load moves wall time far more than CPU time):

* ``--version``, ``--help`` and ``verify --help``: the start alone;
* ``verify RUN`` on a tiny committed run (default: the test fixture of
  ``tests/fixtures/layout_files``): the start plus the imports verify needs.

Anchors measured in the same run: ``python -c pass`` (the interpreter's own start) and
``sha256sum`` over every file of ``RUN``. ``--src DIR`` puts another checkout's ``src``
first on ``PYTHONPATH`` (the "before" of a change: ``git worktree add /tmp/before
<commit>`` then ``--src /tmp/before/src``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RUN = next((REPO / "tests" / "fixtures" / "layout_files").glob("run_*"))


def cpu_seconds(command: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of ``command`` (``os.wait4``); its exit code must be 0.

    Raises:
        RuntimeError: the command exited with another code.

    """
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} exited {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def median_cpu(command: list[str], env: dict[str, str], rounds: int) -> float:
    """The median of ``rounds`` runs' CPU seconds (see :func:`cpu_seconds`)."""
    return statistics.median(cpu_seconds(command, env) for _ in range(rounds))


def main() -> None:
    """Print one line per command: its median CPU seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN, help="a committed run")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the src to measure")
    parser.add_argument("--rounds", type=int, default=10, help="runs per command")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "COLUMNS": "100"}
    files = sorted(str(path) for path in args.run.rglob("*") if path.is_file())
    toolproof = [sys.executable, "-m", "toolproof"]
    lines = [
        ("python -c pass (anchor)", [sys.executable, "-c", "pass"]),
        (f"sha256sum over the run's {len(files)} files (anchor)", ["sha256sum", *files]),
        ("toolproof --version", [*toolproof, "--version"]),
        ("toolproof --help", [*toolproof, "--help"]),
        ("toolproof verify --help", [*toolproof, "verify", "--help"]),
        ("toolproof verify RUN", [*toolproof, "verify", str(args.run)]),
    ]
    print(f"src {args.src}, run {args.run.name[:16]}..., median of {args.rounds}, CPU s")
    for label, command in lines:
        print(f"{label:45} {median_cpu(command, env, args.rounds):6.3f}")


if __name__ == "__main__":
    main()
