"""An agent process for the resume tests: ``python resume_agent.py ROOT MODE [KILL]``.

MODE is ``record`` (a new session ``nightly-42``) or ``resume``. Its tools write their
side effects to ``ROOT/ledger.jsonl`` (fsynced): ``look`` is read-only, ``pay`` honours
the idempotency key (acts once per key), ``charge`` declares nothing (acts every time).
KILL (``tool:order:before`` or ``tool:order:after``) SIGKILLs this process inside that
call's body, before or after its side effect; ``committed:NAME`` SIGKILLs it once the
run of the live directory ``sessions/NAME`` is committed, before that directory is
removed (the window is a few system calls wide, so the kill is placed there by wrapping
the removal the finalize calls; the kill is a real SIGKILL, the run and the live
directory it leaves are the finalize's own); $RESUME_SEGMENT_CALLS is the session's
``segment_calls`` (default 2000). Prints the agent's results as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import toolproof
from toolproof import Tool, Toolset
from toolproof.runs import finalize

ROOT = Path(sys.argv[1])
MODE = sys.argv[2]
KILL = sys.argv[3] if len(sys.argv) > 3 else ""
LEDGER = ROOT / "ledger.jsonl"


def ledger() -> list[dict[str, str]]:
    """Every side effect so far."""
    if not LEDGER.is_file():
        return []
    return [json.loads(line) for line in LEDGER.read_text().splitlines()]


def act(tool: str, order: str, key: str | None) -> None:
    """One side effect, on disk before the body returns; KILL kills around it."""
    if f"{tool}:{order}:before" == KILL:
        os.kill(os.getpid(), signal.SIGKILL)
    with LEDGER.open("a") as out:
        out.write(json.dumps({"tool": tool, "order": order, "key": key}) + "\n")
        out.flush()
        os.fsync(out.fileno())
    if f"{tool}:{order}:after" == KILL:
        os.kill(os.getpid(), signal.SIGKILL)


if KILL.startswith("committed:"):
    remove = finalize.discard_recording

    def killed_before_removal(directory: Path) -> None:
        """SIGKILL this process instead of removing the committed live directory."""
        if directory.name == KILL.removeprefix("committed:"):
            os.kill(os.getpid(), signal.SIGKILL)
        remove(directory)

    finalize.discard_recording = killed_before_removal


@toolproof.tool(read_only=True)
def look(order: str) -> str:
    """Look an order up."""
    return f"order {order}"


@toolproof.tool(idempotency="key")
def pay(order: str, context: toolproof.Context) -> str:
    """Pay an order once per idempotency key."""
    key = context.idempotency_key
    if not any(entry["key"] == key for entry in ledger()):
        act("pay", order, key)
    return str(key)


def charge(order: str, context: toolproof.Context) -> str:
    """Charge an order (acts every time it runs)."""
    act("charge", order, context.idempotency_key)
    return f"charged {order}"


async def main() -> None:
    toolset = Toolset()
    for function in (look, pay, charge):
        toolset.add(Tool.from_function(function))
    toolset.seal()
    results = []
    segment_calls = int(os.environ.get("RESUME_SEGMENT_CALLS", "2000"))
    async with toolproof.record_session(
        toolset,
        root=ROOT,
        task="Nightly.",
        session_id="nightly-42",
        resume=MODE == "resume",
        segment_calls=segment_calls,
    ) as session:
        for tool, order in (("look", "A"), ("charge", "A-1"), ("pay", "B-1"), ("charge", "A-2")):
            result = await session.call(tool, {"order": order})
            results.append(result.to_json())
        results.append((await session.call("look", {"order": "C"})).to_json())
    served = getattr(session, "served_calls", 0)
    summary = {"results": results, "live_calls": session.live_calls, "served_calls": served}
    print(json.dumps({**summary, "run_ids": session.run_ids}))


asyncio.run(main())
