"""A live session of tool calls and model turns, recorded through the runs' own API.

Imported by the evidence-pack tests, and run as a script by the one that kills it:
``python pack_support.py ROOT`` records steps until it is killed, printing the number
of each acknowledged call or turn.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from toolproof import Tool, Toolset
from toolproof.identity import canonical_json, digest
from toolproof.runs.live import LiveRecording, open_recording
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import exchange_key
from toolproof.tools.observe import Observed

URL = "http://127.0.0.1:8031/v1/chat/completions"


def toolset() -> Toolset:
    """One tool, ``echo(n)`` -> ``{"n": n, "text": "value <n>"}``."""

    async def echo(n: int) -> dict[str, Any]:
        return {"n": n, "text": f"value {n}"}

    tools = Toolset()
    tools.add(Tool.from_function(echo, name="echo", description="Echo n."))
    return tools.seal()


def turn(n: int) -> ModelExchange:
    """The ``n``-th model turn: an HTTP chat completion, asked ``q<n>``, answered ``a<n>``."""
    body = canonical_json({"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]})
    answer = canonical_json({"choices": [{"message": {"content": f"a{n}"}}]})
    detail = {"method": "POST", "url": URL, "status": 200}
    return ModelExchange(
        source="http",
        model=f"POST {URL}",
        request=body,
        response=answer,
        key=digest(exchange_key("http", body, detail)),
        detail=detail,
    )


async def step(session: LiveRecording, tools: Toolset, n: int) -> None:
    """Record the ``n``-th step: a call of ``echo(n)``, and after every even one a turn."""
    admission = session.admit("echo", {"n": n})
    session.record(admission, Observed(await tools["echo"].call({"n": n})))
    if n % 2 == 0:
        session.record_turn(turn(n // 2))


async def record(root: Path, steps: int) -> Path:
    """Record ``steps`` steps in a new live session under ``root`` and close it.

    Returns:
        The live session directory (not finalized).

    """
    tools = toolset()
    # a fixed session id: the calls' idempotency keys, and so the run id, do not vary
    session = open_recording(root, tools, task="evidence pack", session_id="evidence-pack")
    for n in range(1, steps + 1):
        await step(session, tools, n)
    session.close()
    return session.directory


async def _forever(root: Path) -> None:
    tools = toolset()
    session = open_recording(root, tools, task="evidence pack")
    n = 0
    while True:
        n += 1
        await step(session, tools, n)
        print(n, flush=True)  # acknowledged: the call (and turn) were written
        if n >= 40:
            await asyncio.sleep(0.01)


if __name__ == "__main__":
    asyncio.run(_forever(Path(sys.argv[1])))
