"""The ``acted-once`` check (issue 34 point 4): at most one execution per key.

Real recorded sessions: a tool that declares none of read-only, idempotent or
``idempotency="key"`` runs its call's body at most once per idempotency key. A
second execution, whether forged into the trace (re-chained, manifest rewritten) or
made for real by a ``retry`` forced onto such a tool, fails verify naming both
executions and the key; an ``outcome_unknown`` call is reported, not failed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runs_support import rechain, trace_events

import toolproof
from toolproof import Tool, Toolset
from toolproof.contract.runs import ExecutionRuntime
from toolproof.contract.tools import ToolResult
from toolproof.extensions import ComboElement, build_combo
from toolproof.identity import canonical_json
from toolproof.runs.chain import verify_chain
from toolproof.verify.verifier import verify_run

RULE = "(rule: at most one execution per key; docs/durability.md)"
WHAT = "(neither read-only nor idempotent, nor honouring the key)"


async def charge(order: str) -> str:
    """Charge an order (acts every time it runs)."""
    return f"charged {order}"


@toolproof.tool(idempotency="key")
async def pay(order: str) -> str:
    """Pay an order once per idempotency key."""
    return f"paid {order}"


@toolproof.tool(read_only=True)
async def look(order: str) -> str:
    """Look an order up."""
    return f"order {order}"


@toolproof.tool(idempotent=True)
async def put(order: str) -> str:
    """Store an order (the same again changes nothing)."""
    return f"stored {order}"


def record(root: Path, toolset: Toolset, calls: list[tuple[str, dict[str, Any]]]) -> Path:
    """Record ``calls`` in one session under ``root``; its run directory."""

    async def main() -> str | None:
        async with toolproof.record_session(toolset, root=root, task="t") as session:
            for tool, arguments in calls:
                await session.call(tool, arguments)
        return session.run_id

    return root / "runs" / str(asyncio.run(main()))


def toolset_of(*tools: Tool) -> Toolset:
    toolset = Toolset()
    for tool in tools:
        toolset.add(tool)
    return toolset.seal()


def acted(run: Path) -> list[str]:
    return [f.finding.message for f in verify_run(run).failures if f.check == "acted-once"]


def called(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in trace if event["type"] == "tool_called"]


def test_the_runtime_records_what_each_tool_declares_and_one_execution_passes(
    tmp_path: Path,
) -> None:
    toolset = toolset_of(*(Tool.from_function(f) for f in (charge, pay, look, put)))
    orders = [("charge", {"order": "A-1"}), ("charge", {"order": "A-1"}), ("pay", {"order": "B"})]
    run = record(tmp_path, toolset, [*orders, ("look", {"order": "B"}), ("put", {"order": "C"})])
    runtime = json.loads((run / "runtime.json").read_bytes())
    assert runtime["repeatable"] == {"look": "read_only", "pay": "key", "put": "idempotent"}
    verification = verify_run(run)
    # the same charge asked twice is two occurrences: two keys, one execution each
    assert (verification.ok, verification.failures, verification.notes) == (True, [], [])


def test_a_forged_second_execution_under_one_key_fails_naming_both_and_the_key(
    tmp_path: Path,
) -> None:
    run = record(
        tmp_path,
        toolset_of(Tool.from_function(charge)),
        [("charge", {"order": "A-1"}), ("charge", {"order": "A-2"})],
    )
    first, second = called(trace_events(run))
    key = first["idempotency_key"]

    def forge(events: list[dict[str, Any]]) -> None:
        called(events)[1]["idempotency_key"] = key  # the second charge ran under the first key

    assert acted(rechain(run, forge)) == [
        f"idempotency key {key} of tool 'charge' {WHAT} was executed twice: by call "
        f"{first['call_id']} at event {first['idx']} and by call {second['call_id']} at event "
        f"{second['idx']} {RULE}"
    ]


def test_a_forged_retry_attempt_fails_naming_the_call_and_the_key(tmp_path: Path) -> None:
    run = record(tmp_path, toolset_of(Tool.from_function(charge)), [("charge", {"order": "A"})])
    [call] = called(trace_events(run))
    failure = ToolResult.fail("tool_error", "tool 'charge' raised RuntimeError: flaky").failure
    assert failure is not None

    def forge(events: list[dict[str, Any]]) -> None:
        at = next(i for i, e in enumerate(events) if e["type"] == "tool_returned")
        observed = {
            "type": "failure_observed",
            "step": call["step"],
            "call_id": call["call_id"],
            "failure": failure.to_json(),
            "recovered_by": "retry",
            "schema_version": 1,
        }
        events.insert(at + 1, observed)

    forged = rechain(run, forge)
    [observed] = [e for e in trace_events(forged) if e["type"] == "failure_observed"]
    assert acted(forged) == [
        f"idempotency key {call['idempotency_key']} of tool 'charge' {WHAT} was executed "
        f"twice: by call {call['call_id']} at event {call['idx']} and again by the same call, "
        f"after its attempt failed tool_error ('retry' ran it again; failure_observed at event "
        f"{observed['idx']}) {RULE}"
    ]


def flaky(name: str, **declared: Any) -> Tool:
    """A tool whose first call raises and second returns, declaring ``declared``."""
    outcomes: list[Exception | str] = [RuntimeError("flaky"), "sent"]

    async def send(to: str) -> str:
        """Send a mail (fails once)."""
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    send.__name__ = name
    return Tool.from_function(toolproof.tool(**declared)(send) if declared else send)


def with_retry(base: Tool) -> Toolset:
    config = {"backoff": 0, "force": True}
    variant = build_combo(base, (ComboElement(name="retry", config=config),))[-1][1]
    return toolset_of(base, variant)


def test_a_retry_forced_onto_a_tool_that_declares_nothing_fails_acted_once(
    tmp_path: Path,
) -> None:
    run = record(tmp_path, with_retry(flaky("send")), [("send_retry", {"to": "a"})])
    [call] = called(trace_events(run))
    [observed] = [e for e in trace_events(run) if e["type"] == "failure_observed"]
    assert observed["recovered_by"] == "retry"
    assert acted(run) == [
        f"idempotency key {call['idempotency_key']} of tool 'send_retry' {WHAT} was executed "
        f"twice: by call {call['call_id']} at event {call['idx']} and again by the same call, "
        f"after its attempt failed tool_error ('retry' ran it again; failure_observed at event "
        f"{observed['idx']}) {RULE}"
    ]


def test_a_retry_of_a_tool_that_honours_the_key_is_one_action(tmp_path: Path) -> None:
    run = record(
        tmp_path, with_retry(flaky("send", idempotency="key")), [("send_retry", {"to": "a"})]
    )
    runtime = json.loads((run / "runtime.json").read_bytes())
    assert runtime["repeatable"] == {"send": "key", "send_retry": "key"}
    assert [e["type"] for e in trace_events(run)].count("failure_observed") == 1
    assert verify_run(run).ok is True


def test_an_outcome_unknown_call_is_reported_as_a_note_not_a_failure(tmp_path: Path) -> None:
    async def wire(to: str) -> ToolResult:
        """Stands in for a resumed session's cut call (issue 34 point 3)."""
        return ToolResult.fail("outcome_unknown", f"the wire to {to} was cut before its result")

    run = record(tmp_path, toolset_of(Tool.from_function(wire)), [("wire", {"to": "bank"})])
    [call] = called(trace_events(run))
    [returned] = [e for e in trace_events(run) if e["type"] == "tool_returned"]
    verification = verify_run(run)
    assert verification.ok is True
    assert [(n.check, n.finding.severity.value, n.finding.message) for n in verification.notes] == [
        (
            "acted-once",
            "warning",
            f"event {returned['idx']}: the outcome of call {call['call_id']} to 'wire' (key "
            f"{call['idempotency_key']}) is unknown: it was cut before its result and not "
            "re-run; find out whether it acted and record it (toolproof sessions reconcile)",
        )
    ]
    assert verification.to_json()["notes"][0]["check"] == "acted-once"


def test_a_session_recorded_before_repeatable_existed_is_not_checked(tmp_path: Path) -> None:
    run = record(
        tmp_path,
        toolset_of(Tool.from_function(charge)),
        [("charge", {"order": "A-1"}), ("charge", {"order": "A-2"})],
    )
    key = called(trace_events(run))[0]["idempotency_key"]
    runtime = ExecutionRuntime.model_validate_json((run / "runtime.json").read_bytes())
    older = ExecutionRuntime.model_validate({**runtime.to_json(), "repeatable": None, "id": ""})
    assert "repeatable" not in older.to_json()
    (run / "runtime.json").write_bytes(canonical_json(older.to_json()))

    def forge(events: list[dict[str, Any]]) -> None:
        called(events)[1]["idempotency_key"] = key

    forged = verify_run(rechain(run, forge))
    checks = {f.check for f in forged.failures}
    assert ("call-linkage" in checks, "acted-once" in checks) == (True, False)


def test_one_key_executed_in_two_segments_fails_the_chain(tmp_path: Path) -> None:
    toolset = toolset_of(Tool.from_function(charge))

    async def main() -> list[str]:
        async with toolproof.record_session(
            toolset, root=tmp_path, task="t", segment_calls=2
        ) as session:
            for order in ("A-1", "A-2", "A-3"):
                await session.call("charge", {"order": order})
        return session.run_ids

    first, second = (tmp_path / "runs" / run_id for run_id in asyncio.run(main()))
    assert verify_chain(second).ok is True
    [one, _] = called(trace_events(first))
    [three] = called(trace_events(second))

    def forge(events: list[dict[str, Any]]) -> None:
        called(events)[0]["idempotency_key"] = one["idempotency_key"]  # A-1's key again

    forged = rechain(second, forge)
    assert acted(forged) == []  # within its own segment the key is recorded once
    assert verify_chain(forged).problem == (
        f"acted-once: idempotency key {one['idempotency_key']} of tool 'charge' was executed "
        f"in segment 1 (run {first.name}, call {one['call_id']} at event {one['idx']}) and "
        f"again in segment 2 (run {forged.name}, call {three['call_id']} at event "
        f"{three['idx']}) (rule: at most one execution per key across a session's segments; "
        "docs/durability.md)"
    )
