"""Scale (issue 31): record, finalize, verify, replay and show a session of N tool calls.

One command: ``python benchmarks/bench_scale.py [--calls N ...] [--root DIR]``
(default ``--calls 10000 100000 1000000``; ``--root``: where the runs go, default a
temporary directory under /tmp, removed at the end; each N's run is removed before
the next N).

For each N, each step runs in its own child process, timed in wall seconds and in CPU
seconds (user + system of the process and its threads, from ``os.wait4``: steadier than
wall time on a loaded machine); its peak RSS is that child's ``ru_maxrss``:

1. record: ``toolproof.record_session`` (``segment_calls=0``: one run, not sealed into
   segments) over a Toolset of one async tool, ``fetch(i)``,
   which returns a distinct 1,200-byte string; N calls ``session.call("fetch",
   {"i": i})``. Printed: the time per call over all N, over the first 10% and the
   last 10% of the calls (flatness within a run), and the peak RSS while recording
   (``VmHWM`` just before the block ends).
2. finalize: leaving the ``record_session`` block commits the run; its time and peak
   RSS (``VmHWM`` after resetting it through ``/proc/self/clear_refs``; elsewhere the
   child's whole peak).
3. ``sha256sum`` over every file of the run (``find RUN -type f -print0 | xargs -0
   sha256sum``), the anchor: reading and hashing the run's bytes once.
4. ``toolproof verify RUN``; ``toolproof replay RUN`` (the recorded spec re-executed
   frozen, docs/runs.md); ``toolproof replay RUN --agent bench_scale:agent`` (the agent
   code run against the recording, docs/agents.md); ``toolproof show RUN``.

Then the run's bytes per call: the trace split by event type (and how much of
``tool_returned`` is the result value again), the evidence files (the result bytes:
what a citation points at) and every other file (manifest, spec, plan, claims,
report, ...), apparent and as allocated on disk. Before each N the free space under
``--root`` is checked against twice the allocated bytes per call measured at the
previous N (the live session and the committed run coexist while finalizing; 8 kB
a call before the first measurement), and the largest peak RSS, extrapolated along
the line through the last two N (through zero after the first; 32 kB a call, the last
measured finalize, before the first), against 80% of the memory available: the
benchmark refuses with one line instead of filling the disk or waking the OOM killer.
Targets (issue 31): every peak RSS < 256 MB at 10^6; verify <= 2x sha256sum; finalize
<= 2x verify; the per-call recording cost flat within 20% (first vs last 10%, and from
the smallest N up).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import toolproof

CALLS_ENV = "BENCH_SCALE_CALLS"
HERE = Path(__file__).resolve().parent
RSS_TARGET = 256 * 2**20
DEFAULT_ALLOCATED_PER_CALL = 8_000
DEFAULT_PEAK_PER_CALL = 32_000
"""Peak RSS a call before any N is measured: finalize's, 3,133 MB at 10^5 (2026-12-06)."""
MB = 1e6
HASH_ALL = 'find "$1" -type f -print0 | xargs -0 sha256sum'
VALUE = "trace:tool_returned value"
ANCHORS = ("sha256sum", "toolproof --version")  # no target: the disk anchor, the CLI's start


async def fetch(i: int) -> str:
    """Return document ``i``: 1,200 ASCII bytes, distinct for each ``i``."""
    return (f"document {i}: " + "lorem ipsum dolor sit amet " * 45)[:1200]


async def agent(session: toolproof.Session) -> None:
    """The recorded agent: N calls of ``fetch`` (N from $BENCH_SCALE_CALLS); replayed by --agent."""
    for i in range(int(os.environ[CALLS_ENV])):
        await session.call("fetch", {"i": i})


def _hwm() -> int:
    """This process's peak RSS so far in bytes (``VmHWM``), or 0 off Linux."""
    try:
        status = Path("/proc/self/status").read_text(encoding="utf-8")
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="utf-8")
    except OSError:
        return False
    return True


async def _record(root: Path, calls: int) -> dict[str, Any]:
    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(fetch))
    toolset.seal()
    tenth = max(calls // 10, 1)
    marks: dict[int, tuple[float, float]] = {}
    # one run of N calls (segment_calls=0): the targets are about one run; a session
    # sealed into segments (the default) is measured by bench_segments.py
    async with toolproof.record_session(
        toolset, root=root, task="scale", segment_calls=0
    ) as session:
        began, began_cpu = time.perf_counter(), time.process_time()
        for i in range(calls):
            if i in (tenth, calls - tenth):
                marks[i] = time.perf_counter(), time.process_time()
            await session.call("fetch", {"i": i})
        ended, ended_cpu = time.perf_counter(), time.process_time()
        record_peak = _hwm()
        reset = _reset_hwm()
    finalized, finalized_cpu = time.perf_counter(), time.process_time()
    return {
        "run_id": session.run_id,
        "record_s": ended - began,
        "first_s": marks[tenth][0] - began,
        "last_s": ended - marks[calls - tenth][0],
        "first_cpu": marks[tenth][1] - began_cpu,
        "last_cpu": ended_cpu - marks[calls - tenth][1],
        "tenth": tenth,
        "finalize_s": finalized - ended,
        "record_cpu": ended_cpu - began_cpu,
        "finalize_cpu": finalized_cpu - ended_cpu,
        "record_peak": record_peak,
        "finalize_peak": _hwm() if reset else None,
    }


def _child(
    argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, float, int, bytes]:
    """Run ``argv``: its wall and CPU seconds, peak RSS in bytes, stdout; exit if it fails.

    CPU is user + system time of the child and the children it waited for (``os.wait4``);
    the peak is its ``ru_maxrss``.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            tail = err.read().decode(errors="replace").strip().splitlines()[-5:]
            command = " ".join(argv[1:4])
            raise SystemExit(f"bench_scale: {command} ... exited {process.returncode}: {tail}")
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, cpu, usage.ru_maxrss * 1024, out.read()


def _toolproof(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    seconds, cpu, peak, _ = _child([sys.executable, "-m", "toolproof", *args], cwd=cwd, env=env)
    return seconds, cpu, peak


def _pack_item_bytes(index: Path) -> int:
    """The bytes of every item in a run's pack: the sum of its index records' sizes.

    ``evidence.idx`` (docs/runs.md): a header line, then one 99-byte record per item,
    ``<64 hex> <16 hex offset> <16 hex size>\\n``.
    """
    data = index.read_bytes()
    body = data[data.index(b"\n") + 1 :]
    return sum(int(body[at + 82 : at + 98], 16) for at in range(0, len(body), 99))


def breakdown(run: Path) -> tuple[Counter[str], int, int]:
    """The run's bytes by part, its allocated bytes and its file count.

    Parts: ``trace:<event type>`` for each trace line (newline included),
    ``trace:tool_returned value`` (the result value inside ``tool_returned``, also counted
    in its line), ``evidence`` for the items' bytes (in ``evidence.pack``, or every file
    under ``evidence/`` in the files layout), the pack's header and item lines, and each
    other top-level file or folder by name.
    """
    parts: Counter[str] = Counter()
    allocated = files = 0
    for folder, _, names in os.walk(run):
        for name in names:
            path = Path(folder, name)
            stat = path.stat()
            allocated += stat.st_blocks * 512
            files += 1
            top = path.relative_to(run).parts[0]
            if top == "trace.jsonl":
                continue
            if top == "evidence.pack":  # the items' bytes are evidence; their lines are not
                items = _pack_item_bytes(run / "evidence.idx")
                parts["evidence"] += items
                parts["evidence.pack (header, item lines)"] += stat.st_size - items
                continue
            parts["evidence" if top == "evidence" else top] += stat.st_size
    with (run / "trace.jsonl").open("rb") as trace:
        for line in trace:
            event = json.loads(line)
            parts[f"trace:{event['type']}"] += len(line)
            if event["type"] == "tool_returned":
                value = event["result"].get("value")
                encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                parts[VALUE] += len(encoded.encode())
    return parts, allocated, files


def _total(parts: Counter[str]) -> int:
    """The run's bytes (the result value inside ``tool_returned`` is counted once, in its line)."""
    return sum(size for part, size in parts.items() if part != VALUE)


def _memory_available() -> int | None:
    try:
        meminfo = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def _peak(m: dict[str, Any]) -> int:
    return int(max(m["peaks"].values()))


def _refusal(root: Path, calls: int, done: list[dict[str, Any]]) -> str | None:
    """One line saying why N calls would not fit (disk, memory), or None."""
    last = done[-1] if done else None
    per_call = last["allocated"] / last["calls"] if last else DEFAULT_ALLOCATED_PER_CALL
    needed = 2 * per_call * calls
    free = shutil.disk_usage(root).free
    if needed > free:
        return (
            f"bench_scale: refusing {calls} calls: needs about {needed / 1e9:.1f} GB free under "
            f"{root} (2 x {per_call / 1e3:.1f} kB a call: the live session and the committed run "
            f"coexist while finalizing), has {free / 1e9:.1f} GB"
        )
    available = _memory_available()
    if available is None:
        return None
    if last is None:  # nothing measured yet: the last recorded figure per call
        peak = DEFAULT_PEAK_PER_CALL * calls
        seen = f"{DEFAULT_PEAK_PER_CALL / 1e3:.0f} kB a call (finalize at 10^5, before)"
    else:  # the growth per call between the last two N (from zero with only one)
        first = done[-2] if len(done) > 1 else {"calls": 0, "peaks": {"": 0}}
        slope = max(_peak(last) - _peak(first), 0) / (last["calls"] - first["calls"])
        peak = _peak(last) + slope * (calls - last["calls"])
        seen = f"{_peak(last) / MB:.0f} MB at {last['calls']} calls"
    if peak > 0.8 * available:
        return (
            f"bench_scale: refusing {calls} calls: the largest peak RSS, {seen}, grows to "
            f"about {peak / 1e9:.1f} GB at {calls}; {available / 1e9:.1f} GB of memory is "
            "available"
        )
    return None


def measure(root: Path, calls: int) -> dict[str, Any]:
    """Every figure for one N (the run is removed afterwards)."""
    base = root / f"calls-{calls}"
    base.mkdir()
    _, _, peak, out = _child([sys.executable, __file__, "--record-child", str(calls), str(base)])
    rec = json.loads(out)
    run = base / "runs" / rec["run_id"]
    times = {"record": rec["record_s"], "finalize": rec["finalize_s"]}
    cpus = {"record": rec["record_cpu"], "finalize": rec["finalize_cpu"]}
    peaks = {"record": rec["record_peak"] or peak, "finalize": rec["finalize_peak"] or peak}
    env = {**os.environ, CALLS_ENV: str(calls)}
    steps: dict[str, tuple[str, ...]] = {
        "toolproof --version": ("--version",),
        "sha256sum": (),
        "verify": ("verify", str(run)),
        "replay": ("replay", str(run)),
        "replay --agent": ("replay", str(run), "--agent", "bench_scale:agent"),
        "show": ("show", str(run)),
    }
    for step, args in steps.items():
        if step == "sha256sum":
            hashing = ["bash", "-c", HASH_ALL, "-", str(run)]
            times[step], cpus[step], peaks[step], _ = _child(hashing)
        else:
            times[step], cpus[step], peaks[step] = _toolproof(*args, cwd=HERE, env=env)
    parts, allocated, files = breakdown(run)
    shutil.rmtree(base)
    return {
        "calls": calls,
        "times": times,
        "cpus": cpus,
        "peaks": peaks,
        "first_us": rec["first_s"] / rec["tenth"] * 1e6,
        "last_us": rec["last_s"] / rec["tenth"] * 1e6,
        "first_cpu_us": rec["first_cpu"] / rec["tenth"] * 1e6,
        "last_cpu_us": rec["last_cpu"] / rec["tenth"] * 1e6,
        "parts": parts,
        "allocated": allocated,
        "files": files,
    }


def _verdict(ok: bool) -> str:
    return "met" if ok else "OVER"


def report(m: dict[str, Any]) -> None:
    """Print one N's figures beside the issue 31 targets."""
    n, times, cpus, peaks = m["calls"], m["times"], m["cpus"], m["peaks"]
    parts: Counter[str] = m["parts"]
    total = _total(parts)
    print(f"\n{n} calls: run {total / MB:.1f} MB in {m['files']} files")
    print(f"  {'step':19s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS':>10s}   target")
    for step, seconds in times.items():
        peak = peaks[step]
        rss = f"{peak / MB:7.0f} MB"
        target = "" if step in ANCHORS else f"RSS < 256 MB: {_verdict(peak < RSS_TARGET)}"
        print(f"  {step:19s} {seconds:8.2f} {cpus[step]:8.2f} {rss:>10s}   {target}")
    for clock, total_s, first, last in (
        ("wall", times["record"], m["first_us"], m["last_us"]),
        ("CPU", cpus["record"], m["first_cpu_us"], m["last_cpu_us"]),
    ):
        flat = last / first
        print(
            f"  record per call, {clock}: {total_s / n * 1e6:.1f} us; first 10% {first:.1f} us, "
            f"last 10% {last:.1f} us ({flat:.2f}x; within 20%: {_verdict(abs(flat - 1) <= 0.2)})"
        )
    for a, b in (("verify", "sha256sum"), ("finalize", "verify")):
        ratio, cpu = times[a] / times[b], cpus[a] / cpus[b]
        print(
            f"  {a} / {b}: {ratio:.1f}x wall, {cpu:.1f}x CPU (target <= 2x: {_verdict(ratio <= 2)})"
        )
    evidence = parts["evidence"]
    print(
        f"  bytes per call: {total / n:,.0f} ({m['allocated'] / n:,.0f} allocated on disk); "
        f"evidence {evidence / n:,.0f}, the rest {(total - evidence) / n:,.0f}"
    )
    for part, size in sorted(parts.items(), key=lambda kv: (not kv[0].startswith("trace"), kv[0])):
        note = "  (inside tool_returned above)" if part == VALUE else ""
        print(f"    {part:32s} {size / n:9,.1f}{note}")


def summary(done: list[dict[str, Any]]) -> None:
    """A markdown table of every N side by side (the README's form)."""
    print("\n| figure | " + " | ".join(f"{m['calls']:,} calls" for m in done) + " | target |")
    print("|---|" + "---|" * (len(done) + 1))
    smallest = {k: done[0][k]["record"] / done[0]["calls"] for k in ("times", "cpus")}

    def row(label: str, cells: list[str], target: str) -> None:
        print(f"| {label} | " + " | ".join(cells) + f" | {target} |")

    for clock, key, first, last in (
        ("wall", "times", "first_us", "last_us"),
        ("CPU", "cpus", "first_cpu_us", "last_cpu_us"),
    ):
        row(
            f"record, {clock} us per call (first 10% / last 10%)",
            [
                f"{m[key]['record'] / m['calls'] * 1e6:.0f} ({m[first]:.0f} / {m[last]:.0f})"
                for m in done
            ],
            "flat within 20%",
        )
        row(
            f"record, {clock} per call vs the smallest N",
            [f"{m[key]['record'] / m['calls'] / smallest[key]:.2f}x" for m in done],
            "within 20%",
        )
    for step in done[0]["times"]:
        row(
            f"{step}: wall s / CPU s (peak RSS)",
            [
                f"{m['times'][step]:.2f} / {m['cpus'][step]:.2f} ({m['peaks'][step] / MB:.0f} MB)"
                for m in done
            ],
            "" if step in ANCHORS else "RSS < 256 MB",
        )
    for a, b in (("verify", "sha256sum"), ("finalize", "verify")):
        row(
            f"{a} / {b}, wall (CPU)",
            [
                f"{m['times'][a] / m['times'][b]:.1f}x ({m['cpus'][a] / m['cpus'][b]:.1f}x)"
                for m in done
            ],
            "<= 2x",
        )
    row(
        "run bytes per call (allocated)",
        [
            f"{_total(m['parts']) / m['calls']:,.0f} ({m['allocated'] / m['calls']:,.0f})"
            for m in done
        ],
        "",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls",
        type=int,
        action="append",
        help="tool calls in a session (repeatable; default 10000 100000 1000000)",
    )
    parser.add_argument("--root", type=Path, help="where the runs go (default a temp dir)")
    parser.add_argument("--record-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record_child:
        calls, root = args.record_child
        print(json.dumps(asyncio.run(_record(Path(root), int(calls)))))
        return
    sizes = args.calls or [10_000, 100_000, 1_000_000]
    if any(n < 10 for n in sizes):
        parser.error("--calls must be at least 10 (the first and last 10% are timed)")
    root = args.root or Path(tempfile.mkdtemp(prefix="bench-scale-", dir="/tmp"))
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()  # the CLI steps run in this folder (``--agent bench_scale:agent``)
    print(f"bench_scale: runs under {root}; python {sys.version.split()[0]}")
    done: list[dict[str, Any]] = []
    refused = None
    try:
        for calls in sizes:
            refused = _refusal(root, calls, done)
            if refused:
                break
            done.append(measure(root, calls))
            report(done[-1])
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)
    if done:
        summary(done)
    if refused:
        print(refused, file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
