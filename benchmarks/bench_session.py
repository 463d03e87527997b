"""Agent sessions: recording overhead per tool call and per model turn, and a 2,000-call run.

One command: ``python benchmarks/bench_session.py [--calls N] [--rounds R] [--dir DIR]``.

1. Per tool call (issue 29, Performance: median <= 40 us over the unrecorded call). The same call of
   a trivial async tool, ``N`` times through ``Session.call`` of a live session (admit,
   the call, the call step written to the OS before it returns) and ``N`` times
   unrecorded (``await tool.call(args)``), interleaved call by call. Printed: the
   median paired difference beside the hashing anchor (SHA-256 of the result bytes,
   same run), for group commit (the default) and with an fsync per call.
2. Per model turn (issue 29: median <= 250 us + hashing). ``session.pydantic_ai_model(m)`` vs
   ``m`` itself (a pydantic-ai ``FunctionModel``) answering the same request, and
   ``session.httpx_transport(inner)`` vs ``inner`` (an ``httpx.MockTransport``
   answering a chat completion in memory: the network would drown the figure),
   interleaved. The anchor is SHA-256 of the exact request and response bytes recorded
   (computed outside the timed part). The ``FunctionModel`` function is async: a sync
   one runs on a thread pool, whose hop (about 150 us, and noisy) is in both arms.
3. Group commit: how many background fsync batches finished while the ``N`` calls
   ran, and how long ``close()`` took to sync the rest. A batch starts at most every
   50 ms and is one ``syncfs(2)`` on Linux (elsewhere: an fsync of the evidence pack
   and of the trace), so the power-loss window is 50 ms plus the time the batch
   takes (see ``runs/recorder.py``).
4. The 2,000-call executor run of ``bench_recorder.py`` (record time of the executor
   with the same recorder; target well under 0.2 s).

Beside each wall-clock median the median *thread CPU* difference is printed
(``time.thread_time`` of the recording thread: steadier on a loaded machine, since it
leaves out time the thread was preempted, but it also leaves out time it waited for
the disk and the sync thread's work). Each figure is the median of ``--rounds``
rounds; the filesystem of ``--dir`` is
printed (``--dir /dev/shm`` for tmpfs).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_recorder import _filesystem, _toolset, bench_run
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolproof.adapters.frameworks.httpx_transport import RecordingTransport
from toolproof.adapters.frameworks.pydantic_ai_model import (
    RecordedModel,
    request_bytes,
    response_bytes,
)
from toolproof.adapters.session import Session
from toolproof.evidence.encoding import encode_value
from toolproof.runs.recorder import Durability
from toolproof.runs.segments import SegmentedRecording

CHAT = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "It is a pear."}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
).encode()


def _session(root: Path, durability: Durability) -> Session:
    toolset = _toolset()
    live = SegmentedRecording(root, toolset, task="bench", segment_calls=0, durability=durability)
    return Session(toolset, live)


def _clocks() -> tuple[float, float]:
    """Wall and this thread's CPU seconds (the recording thread: not the syncer's)."""
    return time.perf_counter(), time.thread_time()


async def _calls(
    root: Path, calls: int, durability: Durability
) -> tuple[float, float, int, float, float, float]:
    """Median overhead, hashing, fsync batches, seconds of the calls, of the close, CPU."""
    session = _session(root, durability)
    tool = _toolset()["echo"]
    diffs, hashes, cpus = [], [], []
    began = time.perf_counter()
    for n in range(calls):
        wall, cpu = _clocks()
        await tool.call({"n": n})
        plain_wall, plain_cpu = _clocks()
        result = await session.call("echo", {"n": n})
        done_wall, done_cpu = _clocks()
        diffs.append(done_wall - plain_wall - (plain_wall - wall))
        cpus.append(done_cpu - plain_cpu - (plain_cpu - cpu))
        data, _ = encode_value(result.value)
        started = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        hashes.append(time.perf_counter() - started)
    assert session._live is not None
    ran = time.perf_counter() - began
    syncs = session._live.current.recorder.syncs
    began = time.perf_counter()
    session._live.current.close()
    closed = time.perf_counter() - began
    median = statistics.median
    return median(diffs), median(hashes), syncs, ran, closed, median(cpus)


async def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("It is a pear.")])


async def _pydantic_turns(root: Path, turns: int) -> tuple[float, float, float]:
    session = _session(root, Durability.GROUP)
    bare = FunctionModel(_respond)
    recorded = RecordedModel(FunctionModel(_respond), session)
    params = ModelRequestParameters()
    diffs, hashes, cpus = [], [], []
    for n in range(turns):
        messages: list[ModelMessage] = [ModelRequest.user_text_prompt(f"Which fruit is {n}?")]
        wall, cpu = _clocks()
        response = await bare.request(messages, None, params)
        plain_wall, plain_cpu = _clocks()
        await recorded.request(messages, None, params)
        done_wall, done_cpu = _clocks()
        diffs.append(done_wall - plain_wall - (plain_wall - wall))
        cpus.append(done_cpu - plain_cpu - (plain_cpu - cpu))
        request = request_bytes(messages, None, params)
        answer = response_bytes(response)
        started = time.perf_counter()
        hashlib.sha256(request).hexdigest()
        hashlib.sha256(answer).hexdigest()
        hashes.append(time.perf_counter() - started)
    assert session._live is not None
    session._live.current.close()
    return statistics.median(diffs), statistics.median(hashes), statistics.median(cpus)


async def _http_turns(root: Path, turns: int) -> tuple[float, float, float]:
    session = _session(root, Durability.GROUP)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=CHAT)

    inner = httpx.MockTransport(answer)
    recorded = RecordingTransport(session, httpx.MockTransport(answer))
    diffs, hashes, cpus = [], [], []
    for n in range(turns):
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": str(n)}]})

        def request(body: str = body) -> httpx.Request:
            return httpx.Request(
                "POST",
                "http://127.0.0.1:8031/v1/chat/completions",
                content=body.encode(),
                headers={"authorization": "Bearer sk-x", "content-type": "application/json"},
            )

        wall, cpu = _clocks()
        response = await inner.handle_async_request(request())
        await response.aread()
        plain_wall, plain_cpu = _clocks()
        response = await recorded.handle_async_request(request())
        await response.aread()
        done_wall, done_cpu = _clocks()
        diffs.append(done_wall - plain_wall - (plain_wall - wall))
        cpus.append(done_cpu - plain_cpu - (plain_cpu - cpu))
        started = time.perf_counter()
        hashlib.sha256(body.encode()).hexdigest()
        hashlib.sha256(CHAT).hexdigest()
        hashes.append(time.perf_counter() - started)
    assert session._live is not None
    session._live.current.close()
    return statistics.median(diffs), statistics.median(hashes), statistics.median(cpus)


def _rounds(rounds: int, base: Path, work: Any, *args: Any) -> list[Any]:
    out = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="bench-session-", dir=base) as tmp:
            out.append(asyncio.run(work(Path(tmp), *args)))
    return out


def _line(
    label: str, overhead: float, hashing: float, budget: float, cpu: float, *, hashed: bool
) -> str:
    """One figure against its issue 29 budget (plus the hashing anchor when ``hashed``)."""
    limit = budget + hashing if hashed else budget
    verdict = "met" if overhead <= limit else "OVER"
    plus = " + hashing" if hashed else ""
    return (
        f"  {label:24s}: median {overhead * 1e6:7.1f} us (hashing {hashing * 1e6:.1f} us; "
        f"budget <= {budget * 1e6:.0f} us{plus}: {verdict}); thread CPU {cpu * 1e6:.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls and turns (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (default 3)")
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()), help="where to write"
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"agent session ({args.calls} calls or turns, {_filesystem(args.dir)} at {args.dir}):")
    group = _rounds(args.rounds, args.dir, _calls, args.calls, Durability.GROUP)
    each = _rounds(args.rounds, args.dir, _calls, args.calls, Durability.EACH)
    for label, figures in (("tool call, group commit", group), ("tool call, fsync/call", each)):
        overhead = statistics.median(f[0] for f in figures)
        hashing = statistics.median(f[1] for f in figures)
        cpu = statistics.median(f[5] for f in figures)
        print(_line(label, overhead, hashing, 40e-6, cpu, hashed=False))
    syncs = statistics.median(f[2] for f in group)
    ran = statistics.median(f[3] for f in group)
    closed = statistics.median(f[4] for f in group)
    print(
        f"  group commit: {syncs:.0f} background fsync batches finished while the {args.calls} "
        f"calls ran ({ran:.2f} s); close() then synced the rest in {closed:.2f} s. A batch "
        "starts at most every 50 ms (one syncfs(2) on Linux): the power-loss window is "
        "50 ms plus the time its batch takes"
    )
    for label, work in (
        ("model turn, pydantic-ai", _pydantic_turns),
        ("model turn, http", _http_turns),
    ):
        figures = _rounds(args.rounds, args.dir, work, args.calls)
        overhead = statistics.median(f[0] for f in figures)
        hashing = statistics.median(f[1] for f in figures)
        cpu = statistics.median(f[2] for f in figures)
        print(_line(label, overhead, hashing, 250e-6, cpu, hashed=True))
    bench_run(args.calls, args.dir, args.rounds)


if __name__ == "__main__":
    main()
