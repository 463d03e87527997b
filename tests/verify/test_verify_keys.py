"""Recorded idempotency keys are checked by ``call-linkage`` (issue 34 point 1).

A real recorded session (three calls: A-1, A-2, A-1 again), then its trace forged by an
attacker who also re-chains the trace and rewrites the manifest: a key that is not its
formula's, or a key recorded for two calls, fails verify naming the event.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from runs_support import rechain, trace_events

import toolproof
from toolproof.identity import digest_json
from toolproof.tools.idempotency import idempotency_key
from toolproof.verify.verifier import verify_run


async def charge(order: str) -> str:
    """Charge an order."""
    return f"charged {order}"


@pytest.fixture
def session_run(tmp_path: Path) -> tuple[Path, str]:
    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(charge))
    toolset.seal()

    async def main() -> tuple[str | None, str]:
        async with toolproof.record_session(toolset, root=tmp_path, task="t") as session:
            for order in ("A-1", "A-2", "A-1"):
                await session.call("charge", {"order": order})
            [live] = list((tmp_path / "sessions").iterdir())
        return session.run_id, live.name

    run_id, session_id = asyncio.run(main())
    return tmp_path / "runs" / str(run_id), session_id


def linkage(run: Path) -> list[str]:
    return [f.finding.message for f in verify_run(run).failures if f.check == "call-linkage"]


def called(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in trace if event["type"] == "tool_called"]


def test_the_recorded_keys_are_the_formulas_and_the_runtime_names_the_session(
    session_run: tuple[Path, str],
) -> None:
    run, session_id = session_run
    runtime = json.loads((run / "runtime.json").read_bytes())
    assert runtime["session"] == session_id
    [fingerprint] = [t["fingerprint"] for t in runtime["toolset"]["tools"]]
    one, two = digest_json({"order": "A-1"}), digest_json({"order": "A-2"})
    assert [e["idempotency_key"] for e in called(trace_events(run))] == [
        idempotency_key(session_id, "charge", fingerprint, one, 1),
        idempotency_key(session_id, "charge", fingerprint, two, 1),
        idempotency_key(session_id, "charge", fingerprint, one, 2),
    ]
    assert verify_run(run).ok is True


def test_a_forged_key_fails_call_linkage_naming_the_event(session_run: tuple[Path, str]) -> None:
    run, session_id = session_run
    forged_key = "idem_" + "0" * 64
    trace = trace_events(run)
    first = called(trace)[0]
    real = first["idempotency_key"]

    def forge(edited: list[dict[str, Any]]) -> None:
        called(edited)[0]["idempotency_key"] = forged_key

    forged = rechain(run, forge)
    idx = first["idx"]
    assert linkage(forged) == [
        f"event {idx}: idempotency key {forged_key} of the call to 'charge' is not the "
        f"formula's {real} (session {session_id!r}, occurrence 1 of these arguments; rule: "
        "docs/durability.md)"
    ]


def test_one_key_recorded_for_two_calls_fails_call_linkage(session_run: tuple[Path, str]) -> None:
    run, _ = session_run
    calls = called(trace_events(run))
    first, third = calls[0], calls[2]

    def reuse(edited: list[dict[str, Any]]) -> None:
        called(edited)[2]["idempotency_key"] = first["idempotency_key"]

    found = linkage(rechain(run, reuse))
    assert found[0] == (
        f"event {third['idx']}: idempotency key {first['idempotency_key']} was already "
        f"recorded for the call at event {first['idx']} (rule: one key names one call)"
    )
    assert len(found) == 2 and "occurrence 2 of these arguments" in found[1]
