"""A resume says what recovering the crashed session dropped (issue 35 point 1).

The crashed session's live trace is torn (its last bytes cut, as a power loss leaves
it); ``record_session(..., resume=True)`` logs each dropped line as a warning naming
the live directory and the run it became, and the run's ``recovery.json`` keeps them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

import toolproof
from toolproof import Tool, Toolset


class Crash(Exception):
    """Where the process dies."""


def look(name: str) -> str:
    """Look a name up (read-only)."""
    return f"saw {name}"


def toolset() -> Toolset:
    tools = Toolset()
    tools.add(Tool.from_function(look))
    return tools.seal()


async def crash_then_resume(root: Path, tear: int, *again: str) -> list[str]:
    """Look ann and bob, crash, cut ``tear`` bytes off the trace, resume: look ann, ``again``."""
    options = {"root": root, "task": "Nightly.", "session_id": "nightly-42"}
    tools = toolset()
    with pytest.raises(Crash):
        async with toolproof.record_session(tools, **options) as session:
            await session.call("look", {"name": "ann"})
            await session.call("look", {"name": "bob"})
            raise Crash
    trace = root / "sessions" / "nightly-42" / "trace.jsonl"
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) - tear])
    async with toolproof.record_session(tools, **options, resume=True) as session:
        for name in ("ann", *again):
            await session.call("look", {"name": name})
    return session.run_ids


def test_a_resume_logs_the_lines_recovery_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolproof.runs"):
        run_ids = asyncio.run(crash_then_resume(tmp_path, 40))
    run = tmp_path / "runs" / run_ids[0]
    dropped = json.loads((run / "recovery.json").read_text())["dropped"]
    assert dropped[0].startswith("trace line 10: not a valid trace event: (event): Invalid JSON")
    assert dropped[0].endswith("; dropped with the 0 lines after it")
    assert dropped[1:] == [
        *(
            f"event {idx} ({kind} of step 'call-00000002'): its call block is incomplete "
            "(the server stopped before the call was answered)"
            for idx, kind in enumerate(
                ("step_started", "tool_called", "tool_returned", "evidence_registered"), 5
            )
        ),
        dropped[-1],
    ]
    assert dropped[-1].endswith(": stored for a call whose block is incomplete")
    live = tmp_path / "sessions" / "nightly-42"
    assert [r.getMessage() for r in caplog.records if r.name == "toolproof.runs"] == [
        f"session 'nightly-42' resumes without what recovery dropped: {live} (recovered "
        f"into {run}): {item}"
        for item in dropped
    ]
