"""Issue 35 point 1: the ``policy`` check re-evaluates recorded decisions offline."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import toolproof
from runs_support import copy_run, rechain, trace_events

from toolproof.adapters.session_runs import record_session
from toolproof.verify.checks import CHECK_SEQUENCE, CHECKS
from toolproof.verify.policy import POLICY_CHECK
from toolproof.verify.sequence import with_recorded
from toolproof.verify.verifier import verify_run

TOOLS = Path(__file__).resolve().parents[1] / "tools"
SMALL = """@id("small-transfers")
permit(principal == Agent::"triage", action == Action::"call_tool", resource == Tool::"transfer")
when { context.arguments.amount < 500 };
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("policy")
    (folder / "policies").mkdir()
    (folder / "policies" / "transfer.cedar").write_text(SMALL, encoding="utf-8")
    config = folder / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{TOOLS}"\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )

    async def main() -> str:
        async with record_session(
            config, root=folder / "root", task="t", principal="Agent::triage"
        ) as s:
            await s.call("transfer", {"to": "bob", "amount": 100, "marker": str(folder / "a")})
            await s.call("transfer", {"to": "bob", "amount": 900, "marker": str(folder / "b")})
        assert s.run_id is not None
        return s.run_id

    return folder / "root" / "runs" / asyncio.run(main())


def _forge(run_dir: Path, tmp_path: Path, mutate: Callable[[list[dict[str, Any]]], None]) -> Path:
    """Copy the run under ``tmp_path``, edit its trace, forge a consistent chain and manifest."""
    return rechain(copy_run(run_dir, tmp_path), mutate)


def _decisions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "policy_decided"]


def _returned(run_dir: Path, call: str) -> dict[str, Any]:
    return next(
        e for e in trace_events(run_dir) if e["type"] == "tool_returned" and e["call_id"] == call
    )


def _policy_failures(run_dir: Path) -> list[str]:
    return [f.finding.message for f in verify_run(run_dir).failures if f.check == "policy"]


def test_the_recorded_run_verifies_and_its_report_holds_the_policy_check(recorded: Path) -> None:
    verification = verify_run(recorded)
    assert verification.ok, [f.finding.message for f in verification.failures]
    assert verification.report is not None
    assert verification.report.sequence == [*CHECK_SEQUENCE, "policy"]  # after the built-ins
    stored = json.loads((recorded / "report.json").read_bytes())
    assert stored["sequence"] == [*CHECK_SEQUENCE, "policy"]
    assert stored["results"][-1] == {
        "schema_version": 1,
        "check": "policy",
        "invariant": "INV-POLICY-DECIDED",
        "severity": "critical",
        "status": "passed",
        "findings": [],
    }


def test_a_forged_decision_fails_the_policy_check_in_the_report(
    recorded: Path, tmp_path: Path
) -> None:
    def allow(events: list[dict[str, Any]]) -> None:
        _decisions(events)[1]["decision"] = "allow"

    verification = verify_run(_forge(recorded, tmp_path, allow))
    assert verification.report is not None
    result = verification.report.results[-1]
    assert (result.check, result.status, len(result.findings)) == ("policy", "failed", 2)
    assert verification.report.outcome == "failed"
    assert sorted({failure.check for failure in verification.failures}) == ["policy", "report"]


def test_a_run_without_a_policy_keeps_the_built_in_sequence() -> None:
    assert with_recorded(CHECKS, False) == CHECKS
    extra = dataclasses.replace(CHECKS[0], id="mine")
    assert [c.id for c in with_recorded((*CHECKS, extra), True)] == [
        *CHECK_SEQUENCE,
        "policy",
        "mine",
    ]
    assert with_recorded((*CHECKS, POLICY_CHECK), True) == (*CHECKS, POLICY_CHECK)


def test_a_denial_forged_into_an_allow_fails(recorded: Path, tmp_path: Path) -> None:
    def allow(events: list[dict[str, Any]]) -> None:
        _decisions(events)[1]["decision"] = "allow"

    forged = _forge(recorded, tmp_path, allow)
    denied = _decisions(trace_events(forged))[1]
    call = denied["call_id"]
    returned = _returned(forged, call)
    assert _policy_failures(forged) == [
        f"policy_decided at event {denied['idx']} for call {call}: recorded allow (determining "
        "[], approval required: False), but the stored policies give deny (determining [], "
        "approval required: False)",
        f"event {returned['idx']}: call {call} was allowed by policy, but fails denied_by_policy",
    ]


def test_an_allow_forged_into_a_deny_fails_naming_the_body_that_ran(
    recorded: Path, tmp_path: Path
) -> None:
    def deny(events: list[dict[str, Any]]) -> None:
        first = _decisions(events)[0]
        first["decision"], first["determining"] = "deny", []

    forged = _forge(recorded, tmp_path, deny)
    first = _decisions(trace_events(forged))[0]
    call = first["call_id"]
    returned = _returned(forged, call)
    assert _policy_failures(forged) == [
        f"policy_decided at event {first['idx']} for call {call}: recorded deny (determining "
        "[], approval required: False), but the stored policies give allow (determining "
        "['small-transfers'], approval required: False)",
        f"event {returned['idx']}: call {call} was denied by policy, but its result is a "
        "value: the body ran",
    ]


def test_a_request_edited_to_pass_the_policy_fails(recorded: Path, tmp_path: Path) -> None:
    def shrink(events: list[dict[str, Any]]) -> None:
        second = _decisions(events)[1]
        second["request"]["context"]["arguments"]["amount"] = 90
        second["decision"], second["determining"] = "allow", ["small-transfers"]

    forged = _forge(recorded, tmp_path, shrink)
    second = _decisions(trace_events(forged))[1]
    marker = second["request"]["context"]["arguments"]["marker"]
    failures = _policy_failures(forged)
    assert failures[0] == (
        f"policy_decided at event {second['idx']} for call {second['call_id']}: its request's "
        f"arguments is {{'amount': 90, 'marker': {marker!r}, 'to': 'bob'}}, but the call's is "
        f"{{'amount': 900, 'marker': {marker!r}, 'to': 'bob'}}"
    )


def test_a_request_with_forged_attributes_fails(recorded: Path, tmp_path: Path) -> None:
    def disguise(events: list[dict[str, Any]]) -> None:
        _decisions(events)[0]["request"]["attributes"]["destructive"] = True

    forged = _forge(recorded, tmp_path, disguise)
    first = _decisions(trace_events(forged))[0]
    bound = {  # as recorded: canonical JSON, keys sorted
        "destructive": False,
        "read_only": False,
        "server": "",
        "source": "python:policy_fixture_tools.transfer",
    }
    assert _policy_failures(forged) == [
        f"policy_decided at event {first['idx']} for call {first['call_id']}: its request's "
        f"attributes is { ({**bound, 'destructive': True})!r}, but the call's is {bound!r}"
    ]


def test_a_dropped_decision_fails(recorded: Path, tmp_path: Path) -> None:
    def drop(events: list[dict[str, Any]]) -> None:
        events.remove(_decisions(events)[0])

    forged = _forge(recorded, tmp_path, drop)
    events = trace_events(forged)
    returned = next(e for e in events if e["type"] == "tool_returned")
    assert _policy_failures(forged)[0] == (
        f"event {returned['idx']}: call {returned['call_id']} ran without a policy decision "
        "(result: a value)"
    )


def test_a_run_specs_calls_are_decided_and_replay_identically(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.cedar").write_text(
        SMALL.replace('principal == Agent::"triage"', "principal"), encoding="utf-8"
    )
    (tmp_path / "toolproof.toml").write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{TOOLS}"\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )
    steps = "".join(
        f'\n[[steps]]\nid = "{name}"\ntool = "transfer"\n'
        f'arguments = {{ to = "bob", amount = {amount}, marker = "{tmp_path / name}" }}\n'
        for name, amount in (("small", 100), ("big", 900))
    )
    (tmp_path / "spec.toml").write_text(
        'task = "pay"\ntoolset = "toolproof.toml"\npolicy = "audit"\n'
        + steps
        + '\n[reasoner]\nname = "tool-results"\n',
        encoding="utf-8",
    )
    ran = toolproof("run", "spec.toml", "--root", "root", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_dir,) = (tmp_path / "root" / "runs").iterdir()
    assert (tmp_path / "small").exists() and not (tmp_path / "big").exists()
    decided = _decisions(trace_events(run_dir))
    assert [(e["decision"], e["determining"], e["request"]["principal"]) for e in decided] == [
        ("allow", ["small-transfers"], "Agent::default"),
        ("deny", [], "Agent::default"),
    ]
    assert verify_run(run_dir).ok
    replayed = toolproof("replay", str(run_dir), "--json")
    answer = json.loads(replayed.stdout)
    assert (answer["identical"], answer["report_matches"], answer["live_calls"]) == (True, True, 0)


def test_the_counts_continue_across_the_segments_of_a_sealed_session(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.cedar").write_text(
        '@id("three")\npermit(principal, action, resource == Tool::"transfer") '
        "when { context.calls < 3 };\n",
        encoding="utf-8",
    )
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{TOOLS}"\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )

    async def main() -> list[str]:
        async with record_session(config, root=tmp_path / "root", task="t", segment_calls=2) as s:
            for n in range(5):
                marker = str(tmp_path / f"m{n}")
                await s.call("transfer", {"to": "bob", "amount": n, "marker": marker})
        return s.run_ids

    run_ids = asyncio.run(main())
    assert len(run_ids) == 3
    runs = [tmp_path / "root" / "runs" / run_id for run_id in run_ids]
    decided = [e for run in runs for e in _decisions(trace_events(run))]
    assert [(e["request"]["context"]["calls"], e["decision"]) for e in decided] == [
        (0, "allow"),
        (1, "allow"),
        (2, "allow"),
        (3, "deny"),
        (4, "deny"),
    ]
    for run in runs:
        verification = verify_run(run)
        assert verification.ok, [f.finding.message for f in verification.failures]
        assert verification.report is not None
        assert verification.report.results[-1].check == "policy"
    # a later segment's report (its policy check continuing the counts) replays as stored
    answer = json.loads(toolproof("replay", str(runs[1]), "--json").stdout)
    assert (answer["identical"], answer["report_matches"]) == (True, True)


APPROVAL = """@id("big") @approval("required")
permit(principal, action, resource) when { context.arguments.amount >= 500 };
@id("small")
permit(principal, action, resource) when { context.arguments.amount < 500 };
"""


def test_a_permit_that_requires_approval_routes_the_call_to_approve(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.cedar").write_text(APPROVAL, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{TOOLS}"\n\n'
        '[tools.transfer]\nextensions = [["approve"]]\n\n'
        '[serve]\nexpose = ["transfer"]\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )

    async def approver(request: Any) -> bool:
        return bool(request.arguments["to"] == "ann")

    def args(to: str, amount: int, name: str) -> dict[str, Any]:
        return {"to": to, "amount": amount, "marker": str(tmp_path / name)}

    async def main() -> tuple[list[Any], str]:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            results = [
                await s.call("transfer", args("ann", 900, "ungated")),
                await s.call("transfer", args("ann", 90, "small")),
                await s.call("transfer_approve", args("ann", 900, "approved")),
                await s.call("transfer_approve", args("bob", 900, "refused")),
            ]
        assert s.run_id is not None
        return results, s.run_id

    results, run_id = asyncio.run(main())
    ungated, small, approved, refused = results
    assert ungated.failure is not None and ungated.failure.message == (
        "call to 'transfer' by Agent::default denied by policy: big permits it only with a "
        "person's approval (@approval(\"required\")), and no approve layer of 'transfer' asks "
        "on every call: call its approve variant (without [[approvals.rules]])"
    )
    assert small.value == "sent 90 to ann"
    assert approved.value == "sent 900 to ann"
    assert refused.failure is not None and refused.failure.kind == "approval_denied"
    assert [(tmp_path / name).exists() for name in ("ungated", "small", "approved", "refused")] == [
        False,
        True,
        True,
        False,
    ]
    run = tmp_path / "root" / "runs" / run_id
    decided = _decisions(trace_events(run))
    assert [(e["decision"], e["determining"], e["approval_required"]) for e in decided] == [
        ("allow", ["big"], True),
        ("allow", ["small"], False),
        ("allow", ["big"], True),
        ("allow", ["big"], True),
    ]
    verification = verify_run(run)
    assert verification.ok, [f.finding.message for f in verification.failures]

    def drop(events: list[dict[str, Any]]) -> None:
        call = _decisions(events)[2]["call_id"]
        events[:] = [
            e for e in events if not (e["type"].startswith("approval_") and e["call_id"] == call)
        ]

    forged = _forge(run, tmp_path / "forged", drop)
    call = _decisions(trace_events(forged))[2]["call_id"]
    returned = _returned(forged, call)
    assert _policy_failures(forged) == [
        f"event {returned['idx']}: call {call} needed a person's approval by policy and has no "
        "approving decision, but its result is a value: the body ran"
    ]
