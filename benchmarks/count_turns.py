"""Instructions per recorded model turn, pydantic-ai and http (callgrind).

One command: ``python benchmarks/count_turns.py [--turns N]`` (needs ``valgrind``).

The turns of ``bench_session.py`` (``RecordedModel`` over a pydantic-ai
``FunctionModel``; ``RecordingTransport`` over an ``httpx.MockTransport`` answering a
chat completion), counted in instructions instead of timed: a count is repeatable on a
loaded, shared machine where microseconds are not. Each count is one
``valgrind --tool=callgrind`` child that opens a live session and asks ``N + 100``
turns, the first ``k`` through the recorder and the rest of the bare model or
transport (the benchmark's other arm); per turn: ``(count(k = N + 100) - count(k =
100)) / N``, so both children are warm (first-use costs fall in the first 100) and the
difference is the recording of ``N`` turns. The group syncer runs one batch at the
first commit and one at close (valgrind's slowdown would otherwise fit many more
batches in each turn). Callgrind counts user space only: system calls' kernel time is
not in it, so read it next to the ``bench_session.py`` figures, not instead of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from bench_session import CHAT, _respond, _session
from callgrind import instructions
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import FunctionModel

from toolproof.adapters.frameworks.httpx_transport import RecordingTransport
from toolproof.adapters.frameworks.pydantic_ai_model import RecordedModel
from toolproof.runs.recorder import Durability

KINDS = ("pydantic-ai", "http")
WARM = 100
URL = "http://127.0.0.1:8031/v1/chat/completions"


async def child(kind: str, recorded: int, total: int, root: Path) -> None:
    """Ask ``total`` turns of ``kind``, the first ``recorded`` of them recorded."""
    session = _session(root, Durability.GROUP)
    assert session._live is not None and session._live.recorder._sync is not None
    session._live.recorder._sync._interval = 3600.0
    if kind == "pydantic-ai":
        bare = FunctionModel(_respond)
        model = RecordedModel(FunctionModel(_respond), session)
        params = ModelRequestParameters()
        for n in range(total):
            messages: list[ModelMessage] = [ModelRequest.user_text_prompt(f"Which is {n}?")]
            await (model if n < recorded else bare).request(messages, None, params)
    else:

        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers={"content-type": "application/json"}, content=CHAT)

        inner = httpx.MockTransport(answer)
        transport = RecordingTransport(session, httpx.MockTransport(answer))
        for n in range(total):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": str(n)}]})
            request = httpx.Request(
                "POST",
                URL,
                content=body.encode(),
                headers={"authorization": "Bearer sk-x", "content-type": "application/json"},
            )
            response = await (transport if n < recorded else inner).handle_async_request(request)
            await response.aread()
    session._live.close()


def count(kind: str, recorded: int, total: int) -> int:
    """Instructions callgrind counts for one child."""
    return instructions(
        __file__, "--child", kind, "--recorded", str(recorded), "--turns", str(total)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400, help="recorded turns counted")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--recorded", type=int, default=0, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        with tempfile.TemporaryDirectory(prefix="count-turns-") as tmp:
            asyncio.run(child(options.child, options.recorded, options.turns, Path(tmp)))
        return 0
    total = options.turns + WARM
    for kind in KINDS:  # a native child first writes the bytecode caches
        subprocess.run(
            [sys.executable, __file__, "--child", kind, "--recorded", "1", "--turns", "2"],
            check=True,
        )
    print(f"{'model turn':14} {'instructions/turn':>18}")
    for kind in KINDS:
        per_turn = (count(kind, total, total) - count(kind, WARM, total)) / options.turns
        print(f"{kind:14} {per_turn:18.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
