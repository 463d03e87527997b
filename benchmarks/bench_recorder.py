"""The recorder: per-call overhead in a session, durability modes, and a 2,000-call run.

One command: ``python benchmarks/bench_recorder.py [--calls N] [--dir DIR]``.

1. Session overhead (issue 15, Performance). The same call of a trivial async tool
   is made ``N`` times unrecorded (``await tool.call(args)``) and ``N`` times recorded
   through a live session (``admit`` → the call inside ``observe`` →
   ``record``, which writes the call step to the OS before it returns), the two
   interleaved call by call so both see the same machine load. Printed: the median
   of the paired differences, against the target ``<= 25 us + hashing the result``
   (the hashing anchor, SHA-256 of the result bytes, is measured in the same run),
   for group commit (the default: fsync at most every 50 ms) and beside it with an
   fsync per call.
2. Runs (issue 15: "the 2,000-call run should record in well under 0.2 s"). A spec
   of ``N`` calls is executed by ``record_run`` (executor + recorder, no checks) and
   by ``execute_run`` (plan, execute, the ordered checks reading every file back, the
   atomic commit); the anchor is the same events written through the validated
   model path (``TraceWriter.emit``, the pre-recorder emitter) plus the same evidence
   store, measured in the same run.

3. Evidence storage alone: ``N`` distinct result-sized items stored by
   ``EvidenceStore.put`` in a run's pack (its index written at close) and in a live
   session's pack (``live=True``: no index), interleaved round by round; printed per
   item: the median and the mean wall time (the mean carries the slow creates a busy
   journal stalls) and the thread CPU.

Timings on a shared machine vary; each figure is the median of ``--rounds`` rounds
and the directory's filesystem is printed (file creation dominates on a busy disk:
pass ``--dir /dev/shm`` for tmpfs).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from toolproof import Tool, Toolset
from toolproof.bundle.trace import TraceWriter
from toolproof.contract.runs import ReasonerSpec, RunSpec
from toolproof.contract.tools import ToolCall, ToolResult
from toolproof.contract.trace import (
    EvidenceRegistered,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.evidence.encoding import encode_value
from toolproof.evidence.store import EvidenceStore
from toolproof.runs.calls import LiveCalls, LiveClock
from toolproof.runs.executor import Executor
from toolproof.runs.live import open_recording
from toolproof.runs.planner import plan_run
from toolproof.runs.recorder import CallRecord, Durability, Recorder
from toolproof.runs.run import execute_run
from toolproof.tools.observe import Observed, observe


def _toolset() -> Toolset:
    async def echo(n: int) -> dict[str, Any]:
        return {"n": n, "square": n * n}

    toolset = Toolset()
    toolset.add(Tool.from_function(echo, name="echo", description="Echo n and n*n."))
    return toolset.seal()


def _filesystem(path: Path) -> str:
    done = subprocess.run(
        ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=False
    )
    lines = done.stdout.split()
    return lines[-1] if done.returncode == 0 and lines else "?"


async def _session_overhead(
    toolset: Toolset, root: Path, calls: int, durability: Durability
) -> tuple[float, float]:
    """Median paired (recorded - unrecorded) seconds per call, and median hashing seconds."""
    tool = toolset["echo"]
    session = open_recording(root, toolset, durability=durability)
    diffs, hashes = [], []
    for n in range(calls):
        arguments = {"n": n}
        started = time.perf_counter()
        await tool.call(arguments)
        plain = time.perf_counter() - started
        arguments = {"n": n}
        started = time.perf_counter()
        admission = session.admit("echo", arguments)
        observed = await observe(tool.call(arguments))
        session.record(admission, observed)
        result = observed.result
        recorded = time.perf_counter() - started
        data, _ = encode_value(result.value)
        started = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        hashes.append(time.perf_counter() - started)
        diffs.append(recorded - plain)
    session.close()
    return statistics.median(diffs), statistics.median(hashes)


def bench_session(calls: int, base: Path, rounds: int) -> None:
    toolset = _toolset()
    print(f"session overhead per tool call ({calls} calls, {_filesystem(base)} at {base}):")
    for durability, label in ((Durability.GROUP, "group commit"), (Durability.EACH, "fsync/call")):
        figures = []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory(prefix="bench-recorder-", dir=base) as tmp:
                figures.append(
                    asyncio.run(_session_overhead(toolset, Path(tmp), calls, durability))
                )
        overhead = statistics.median(f[0] for f in figures)
        hashing = statistics.median(f[1] for f in figures)
        verdict = "ok" if overhead <= 25e-6 + hashing else "OVER"
        print(
            f"  {label:13s}: median {overhead * 1e6:8.1f} us per call "
            f"(hashing the result: {hashing * 1e6:.1f} us; target <= 25 us + hashing: {verdict})"
        )


def _spec(calls: int) -> RunSpec:
    steps = [{"id": f"s{i}", "tool": "echo", "arguments": {"n": i}} for i in range(calls)]
    return RunSpec.model_validate({"task": "many calls", "steps": steps})


def _anchor(directory: Path, spec: RunSpec) -> None:
    """The same call steps through the validated-model emitter and the evidence store."""
    trace = TraceWriter(directory / "trace.jsonl")
    store = EvidenceStore(directory)
    for step in spec.steps:
        call = ToolCall(tool="echo", arguments=dict(step.arguments), step=step.id)
        n = step.arguments["n"]
        value = {"n": n, "square": n * n}
        result = ToolResult.success(value)
        data, media_type = encode_value(value)
        trace.emit(StepStarted, step=step.id, kind="call")
        trace.emit(ToolCalled, step=step.id, call_id=call.id, call=call)
        trace.emit(ToolReturned, step=step.id, call_id=call.id, result=result)
        record = store.put(
            data, media_type=media_type, kind="tool_result", step=step.id, call=call.id
        )
        trace.emit(EvidenceRegistered, step=step.id, evidence=record)
        trace.emit(StepFinished, step=step.id, status="ok", detail={"evidence": record["id"]})
    trace.close(sync=False)


class _NullRecorder(Recorder):
    """A recorder that writes nothing: the executor's own cost, for the difference."""

    def emit(self, cls: type[Any], **fields: Any) -> None:
        self._count = getattr(self, "_count", 0) + 1

    @property
    def count(self) -> int:
        return getattr(self, "_count", 0)

    def register(
        self,
        step: str,
        data: bytes,
        media_type: str,
        kind: str,
        call: str | None,
        detail: dict[str, Any],
    ) -> dict[str, Any]:
        return _NULL_RECORD

    def call_block(
        self, step: str, call: dict[str, Any], observed: Observed, *_: Any, **__: Any
    ) -> CallRecord:
        # the call block's three lines, counted
        self._count = getattr(self, "_count", 0) + 3
        return CallRecord(call, observed.result, _NULL_RECORD)


_NULL_RECORD = {
    "schema_version": 1,
    "id": "evidence_" + "0" * 64,
    "digest": "sha256:" + "0" * 64,
    "size": 0,
    "media_type": "application/json",
    "path": "evidence/" + "0" * 64,
    "source": {"schema_version": 1, "kind": "tool_result", "step": "s", "call": None, "detail": {}},
}


def _execute(directory: Path, spec: RunSpec, plan: Any, toolset: Toolset, null: bool) -> None:
    recorder = (_NullRecorder if null else Recorder)(directory)
    executor = Executor(
        spec=spec,
        plan=plan,
        calls=LiveCalls(toolset),
        clock=LiveClock(None),
        reasoner=reasoner_registry().create(ReasonerSpec()),
        recorder=recorder,
    )
    asyncio.run(executor.run())
    recorder.close(sync=False)


def _timed(function: Any, *args: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    function(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_run(calls: int, base: Path, rounds: int) -> None:
    toolset = _toolset()
    spec = _spec(calls)
    plan = plan_run(spec, toolset.descriptor())
    rows: dict[str, list[tuple[float, float]]] = {
        "anchor": [],
        "null": [],
        "recorded": [],
        "execute_run": [],
    }
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="bench-recorder-", dir=base) as tmp:
            for name in ("a", "n", "r"):
                (Path(tmp) / name).mkdir()
            rows["anchor"].append(_timed(_anchor, Path(tmp) / "a", spec))
            rows["null"].append(_timed(_execute, Path(tmp) / "n", spec, plan, toolset, True))
            rows["recorded"].append(_timed(_execute, Path(tmp) / "r", spec, plan, toolset, False))
            rows["execute_run"].append(
                _timed(
                    lambda: asyncio.run(execute_run(spec, root=Path(tmp) / "root", toolset=toolset))
                )
            )
    wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
    per = 1e6 / calls
    print(f"a run of {calls} calls ({_filesystem(base)}; median of {rounds}; wall | CPU):")
    print(
        f"  pre-recorder emitter (validated models + store.put), anchor: "
        f"{wall['anchor']:.3f} s | {cpu['anchor']:.3f} s ({cpu['anchor'] * per:.0f} us CPU/call)"
    )
    print(f"  executor, recorder writing nothing   : {wall['null']:.3f} s | {cpu['null']:.3f} s")
    print(
        f"  executor + recorder (the run records) : {wall['recorded']:.3f} s | "
        f"{cpu['recorded']:.3f} s; recording alone "
        f"{(cpu['recorded'] - cpu['null']) * per:.0f} us CPU/call "
        f"({(cpu['recorded'] - cpu['null']) / cpu['anchor']:.2f}x the anchor)"
    )
    print(
        f"  execute_run (+ plan, checks reading every file back, commit): "
        f"{wall['execute_run']:.3f} s | {cpu['execute_run']:.3f} s"
    )


def _store(directory: Path, calls: int, pack: bool) -> tuple[float, float, float]:
    """Median and mean wall seconds per item (the close, index included, not counted), CPU."""
    store = EvidenceStore(directory, live=pack)
    items = [b'{"n":%d,"square":%d}' % (n, n * n) for n in range(calls)]
    each = []
    began, cpu = time.perf_counter(), time.thread_time()
    for data in items:
        started = time.perf_counter()
        store.put(data, media_type="application/json", kind="tool_result", step="s")
        each.append(time.perf_counter() - started)
    wall, cpu = time.perf_counter() - began, time.thread_time() - cpu
    store.close(sync=False)
    return statistics.median(each), wall / calls, cpu / calls


def bench_store(calls: int, base: Path, rounds: int) -> None:
    rows: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    for _ in range(rounds):
        for pack in (False, True):
            with tempfile.TemporaryDirectory(prefix="bench-recorder-", dir=base) as tmp:
                rows[pack].append(_store(Path(tmp), calls, pack))
    print(f"evidence storage ({calls} items, {_filesystem(base)}; median of {rounds}; per item):")
    for pack, label in ((False, "a run's pack and index   "), (True, "a live session's pack   ")):
        median, mean, cpu = (statistics.median(f[i] for f in rows[pack]) for i in range(3))
        print(
            f"  {label}: median {median * 1e6:6.1f} us, mean {mean * 1e6:6.1f} us, "
            f"thread CPU {cpu * 1e6:5.1f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="tool calls (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (default 3)")
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()), help="where to write"
    )
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    bench_session(args.calls, args.dir, args.rounds)
    bench_run(args.calls, args.dir, args.rounds)
    bench_store(args.calls, args.dir, args.rounds)


if __name__ == "__main__":
    main()
