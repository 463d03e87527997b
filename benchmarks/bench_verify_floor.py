"""The floor under ``toolproof verify`` (issue 31 point 3): what reading a run costs, by layer.

One command: ``python benchmarks/bench_verify_floor.py RUN`` (a committed run directory,
e.g. one ``bench_scale.py --root DIR`` left, or any ``ROOT/runs/<run_id>``).

Each layer is the one before plus one more piece of what verify must do with the
trace's bytes, timed in CPU seconds (``time.process_time``) in this process, best of
``--repeat`` rounds, beside ``sha256sum`` over every file of the run in the same run
(a child's user + system time):

1. ``hashlib`` SHA-256 of every file of the run, read in 1 MiB blocks (the bytes once);
2. + the trace split into lines and each line's own SHA-256 (the hash chain's ``prev``);
3. + each line parsed by the C ``json.loads`` (the cheapest parse a Python verify has);
4. + each line validated as its trace event model instead (``TRACE_EVENT_ADAPTER``,
   pydantic-core: the events every check reads);
5. + each event's canonical JSON compared with its line (RFC 8785: ``parse_event``, what
   verify's schema check requires of every line).

The difference between layer 5 and a whole ``verify_run`` (also timed) is the checks
themselves and the small files (spec, plan, runtime, claims, report).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from toolproof.bundle.trace import parse_event
from toolproof.contract.trace import TRACE_EVENT_ADAPTER
from toolproof.identity import digest
from toolproof.verify.verifier import verify_run

BLOCK = 1 << 20


def _files(run: Path) -> list[Path]:
    return sorted(path for path in run.rglob("*") if path.is_file())


def _hash_files(run: Path) -> None:
    for path in _files(run):
        sha = hashlib.sha256()
        with path.open("rb", buffering=0) as file:
            while block := file.read(BLOCK):
                sha.update(block)


def _per_line(run: Path, work: Callable[[bytes], object]) -> None:
    _hash_files(run)
    for line in (run / "trace.jsonl").read_bytes().split(b"\n")[:-1]:
        digest(line)
        work(line)


def _sha256sum(run: Path) -> float:
    names = [str(path) for path in _files(run)]
    started = os.times()
    subprocess.run(["sha256sum", *names], check=True, stdout=subprocess.DEVNULL)
    ended = os.times()
    return (ended.children_user - started.children_user) + (
        ended.children_system - started.children_system
    )


def _best(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a committed run directory")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best is kept")
    args = parser.parse_args()
    run: Path = args.run
    size = sum(path.stat().st_size for path in _files(run))
    lines = (run / "trace.jsonl").read_bytes().count(b"\n")
    anchor = min(_sha256sum(run) for _ in range(args.repeat))
    layers: list[tuple[str, Callable[[], object]]] = [
        ("1. SHA-256 of every file (hashlib)", lambda: _hash_files(run)),
        ("2. + each trace line's SHA-256", lambda: _per_line(run, len)),
        ("3. + json.loads of each line", lambda: _per_line(run, json.loads)),
        (
            "4. + its event model instead (pydantic)",
            lambda: _per_line(run, TRACE_EVENT_ADAPTER.validate_json),
        ),
        ("5. + its canonical JSON compared (parse_event)", lambda: _per_line(run, parse_event)),
        ("verify_run (every check)", lambda: verify_run(run)),
    ]
    print(f"{run.name}: {size / 1e6:.1f} MB, {lines} trace lines")
    print(f"  {'layer':48s} {'CPU s':>7s} {'x sha256sum':>12s}")
    print(f"  {'sha256sum over every file (the anchor)':48s} {anchor:7.3f} {1:11.1f}x")
    for label, work in layers:
        seconds = _best(args.repeat, work)
        print(f"  {label:48s} {seconds:7.3f} {seconds / anchor:11.1f}x")


if __name__ == "__main__":
    main()
