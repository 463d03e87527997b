"""The ``approvals`` check (INV-APPROVAL-BOUND): forged decisions fail verify naming the call."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runs_support import copy_run, rechain, trace_events

from toolproof import ApprovalRequest, Decision, load_toolset
from toolproof.contract.runs import RunSpec
from toolproof.identity import digest_json
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

FIXTURES = Path(__file__).resolve().parent.parent / "extensions"
GATED = "delete_branch_approve"


class Approver:
    """Approves every branch but ``b3``; counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.arguments["branch"])
        return Decision(request.arguments["branch"] != "b3", reason="policy")


RULES = '\n[[approvals.rules]]\narguments = { "/force" = true }\n'
"""Only a forced delete needs a person."""


def _run(tmp_path: Path, approver: Approver, rules: str = "", forced: str = "") -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{FIXTURES}"\n\n'
        '[tools.delete_branch]\nextensions = [["approve"]]\n' + rules,
        encoding="utf-8",
    )
    side = str(tmp_path / "side.txt")
    spec = RunSpec.model_validate(
        {
            "task": "Delete three branches.",
            "steps": [
                {
                    "id": b,
                    "tool": GATED,
                    "arguments": {
                        "path": side,
                        "branch": b,
                        **({"force": True} if b == forced else {}),
                    },
                }
                for b in ("b1", "b2", "b3")
            ],
        }
    )

    async def main() -> Path:
        async with load_toolset(config, approver=approver) as toolset:
            outcome = await execute_run(spec, root=tmp_path / "root", toolset=toolset)
        return outcome.path

    return asyncio.run(main())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Approver]:
    tmp_path = tmp_path_factory.mktemp("approvals")
    approver = Approver()
    return _run(tmp_path, approver), approver


def _forge(run_dir: Path, tmp_path: Path, mutate: Callable[[list[dict[str, Any]]], None]) -> Path:
    """Copy the run under ``tmp_path``, edit its trace, forge a consistent chain and manifest."""
    return rechain(copy_run(run_dir, tmp_path), mutate)


def _of(events: list[dict[str, Any]], step: str, kind: str) -> dict[str, Any]:
    return next(e for e in events if e["step"] == step and e["type"] == kind)


def _approvals(run_dir: Path) -> list[str]:
    return [f.finding.message for f in verify_run(run_dir).failures if f.check == "approvals"]


def test_a_run_with_gated_calls_verifies_and_denied_bodies_never_ran(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, approver = recorded
    failures = verify_run(run_dir).failures
    assert [(f.check, str(f.finding.severity)) for f in failures] == [
        ("required-steps", "warning")  # b3 denied: its step failed
    ]
    assert approver.asked == ["b1", "b2", "b3"]
    events = trace_events(run_dir)
    block = [e["type"] for e in events if e["step"] == "b1"]
    assert block == [
        "step_started",
        "approval_requested",
        "approval_decided",
        "tool_called",
        "tool_returned",
        "evidence_registered",
        "step_finished",
    ]
    denied = _of(events, "b3", "tool_returned")["result"]["failure"]
    assert denied["kind"] == "approval_denied"
    side = run_dir.parent.parent.parent / "side.txt"
    assert side.read_text(encoding="utf-8") == "b1 force=False\nb2 force=False\n"


def test_replay_serves_the_recorded_decisions_and_never_asks(
    recorded: tuple[Path, Approver],
) -> None:
    run_dir, approver = recorded
    asked = list(approver.asked)
    result = asyncio.run(replay_run(run_dir))
    assert result.identical and result.live_calls == 0
    assert approver.asked == asked


def test_an_edited_approved_digest_fails_naming_the_call(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b1", "tool_called")["call_id"]
    requested = _of(events, "b1", "approval_requested")["arguments_digest"]
    other = digest_json({"branch": "main"})
    forged = _forge(
        run_dir,
        tmp_path,
        lambda ev: _of(ev, "b1", "approval_decided").update(approved_digest=other),
    )
    assert _approvals(forged) == [
        f"call {call} ('{GATED}'): the decision approves {other}, not the requested "
        f"arguments {requested}"
    ]


def test_a_decision_moved_to_another_call_fails_naming_both(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    b1, b2 = (_of(events, s, "tool_called")["call_id"] for s in ("b1", "b2"))
    forged = _forge(
        run_dir, tmp_path, lambda ev: _of(ev, "b1", "approval_decided").update(call_id=b2)
    )
    (message,) = _approvals(forged)
    assert message.startswith(f"call {b1} ('{GATED}'): approval_decided at event 2 names call {b2}")


def test_a_dropped_decision_fails_naming_the_call(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b2", "tool_called")["call_id"]
    request = _of(events, "b2", "approval_requested")["request"]

    def drop(ev: list[dict[str, Any]]) -> None:
        ev.remove(_of(ev, "b2", "approval_decided"))

    assert _approvals(_forge(run_dir, tmp_path, drop)) == [
        f"call {call} ('{GATED}'): it ran without a decision on request {request}"
    ]


def test_a_dropped_request_and_decision_fail_when_every_call_is_gated(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    call = _of(trace_events(run_dir), "b2", "tool_called")["call_id"]

    def drop(ev: list[dict[str, Any]]) -> None:
        ev.remove(_of(ev, "b2", "approval_decided"))
        ev.remove(_of(ev, "b2", "approval_requested"))

    assert _approvals(_forge(run_dir, tmp_path, drop)) == [
        f"call {call} ('{GATED}'): it ran with no approval record (approval_requested or "
        "approval_skipped), although it is an approve variant: every call of one records one"
    ]


def test_a_call_that_ran_after_a_denial_fails(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b1", "tool_called")["call_id"]
    request = _of(events, "b1", "approval_requested")["request"]
    forged = _forge(
        run_dir,
        tmp_path,
        lambda ev: _of(ev, "b1", "approval_decided").update(decision="deny", approved_digest=None),
    )
    assert _approvals(forged) == [
        f"call {call} ('{GATED}'): it ran although request {request} was denied"
    ]


def test_a_request_for_other_arguments_approves_nothing(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b2", "tool_called")
    actual = digest_json(call["call"]["arguments"])
    other = digest_json({"branch": "b2", "path": "/elsewhere"})

    def retarget(ev: list[dict[str, Any]]) -> None:
        _of(ev, "b2", "approval_requested").update(arguments_digest=other)
        _of(ev, "b2", "approval_decided").update(approved_digest=other)

    assert _approvals(_forge(run_dir, tmp_path, retarget)) == [
        f"call {call['call_id']} ('{GATED}'): approval was requested for arguments {other}, "
        f"but the call's arguments digest to {actual}"
    ]


def test_a_decision_after_its_call_is_an_orphan(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b1", "tool_called")["call_id"]

    def late(ev: list[dict[str, Any]]) -> None:
        decided = _of(ev, "b1", "approval_decided")
        ev.remove(decided)
        finished = ev.index(_of(ev, "b1", "step_finished"))
        ev.insert(finished, decided)

    messages = _approvals(_forge(run_dir, tmp_path, late))
    assert messages[0].startswith(f"call {call} ('{GATED}'): it ran without a decision")
    assert messages[1] == (
        f"approval_decided at event 5 for call {call} is followed by no tool_called in its "
        "step (it must come before the call it approves)"
    )


@pytest.fixture(scope="module")
def ruled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Approver]:
    """A run under ``/force = true``: b1 forced (gated, approved), b2 and b3 no rule matched."""
    tmp_path = tmp_path_factory.mktemp("ruled")
    approver = Approver()
    return _run(tmp_path, approver, RULES, forced="b1"), approver


RULE_RECORD = {"index": 0, "when": {}, "arguments": {"/force": True}}


def test_calls_no_rule_matched_record_a_skip_and_verify(ruled: tuple[Path, Approver]) -> None:
    run_dir, approver = ruled
    assert verify_run(run_dir).failures == []
    assert approver.asked == ["b1"]
    events = trace_events(run_dir)
    assert [e["type"] for e in events if e["step"] == "b2"] == [
        "step_started",
        "approval_skipped",
        "tool_called",
        "tool_returned",
        "evidence_registered",
        "step_finished",
    ]
    skipped = _of(events, "b2", "approval_skipped")
    assert (skipped["call_id"], skipped["tool"], skipped["rules"]) == (
        _of(events, "b2", "tool_called")["call_id"],
        GATED,
        [RULE_RECORD],
    )
    assert _of(events, "b1", "approval_requested")["rule"] == RULE_RECORD
    assert [e["type"] for e in events if e["step"] == "b1"][1:3] == [
        "approval_requested",
        "approval_decided",
    ]
    replayed = asyncio.run(replay_run(run_dir))  # the skips are served back like decisions
    assert replayed.identical and replayed.live_calls == 0


def test_a_gated_call_whose_approval_events_were_deleted_fails_naming_it(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    call = _of(trace_events(run_dir), "b1", "tool_called")["call_id"]

    def drop(ev: list[dict[str, Any]]) -> None:
        ev.remove(_of(ev, "b1", "approval_decided"))
        ev.remove(_of(ev, "b1", "approval_requested"))

    assert _approvals(_forge(run_dir, tmp_path, drop)) == [
        f"call {call} ('{GATED}'): it ran with no approval record (approval_requested or "
        "approval_skipped), although it is an approve variant: every call of one records one"
    ]


def test_a_deleted_skip_fails_naming_the_call(ruled: tuple[Path, Approver], tmp_path: Path) -> None:
    run_dir, _ = ruled
    call = _of(trace_events(run_dir), "b3", "tool_called")["call_id"]
    forged = _forge(run_dir, tmp_path, lambda ev: ev.remove(_of(ev, "b3", "approval_skipped")))
    assert _approvals(forged) == [
        f"call {call} ('{GATED}'): it ran with no approval record (approval_requested or "
        "approval_skipped), although it is an approve variant: every call of one records one"
    ]


def test_a_skip_forged_for_a_call_a_rule_matches_fails(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    call = _of(trace_events(run_dir), "b1", "tool_called")["call_id"]

    def replace(ev: list[dict[str, Any]]) -> None:
        requested = _of(ev, "b1", "approval_requested")
        at = ev.index(requested)
        ev.remove(_of(ev, "b1", "approval_decided"))
        ev[at] = {**_of(ev, "b2", "approval_skipped"), "step": "b1", "call_id": call}

    assert _approvals(_forge(run_dir, tmp_path, replace)) == [
        f"call {call} ('{GATED}'): rule 0 matches its arguments, but it ran without an "
        "approval request (approval_skipped claims no rule matched)"
    ]


def test_skips_and_requests_of_a_variant_must_record_the_same_rules(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    events = trace_events(run_dir)
    b2, b3 = (_of(events, s, "approval_skipped") for s in ("b2", "b3"))
    forged = _forge(
        run_dir, tmp_path, lambda ev: _of(ev, "b3", "approval_skipped").update(rules=[])
    )
    assert _approvals(forged) == [
        f"approval_skipped at event {b3['idx']} for call {b3['call_id']} records other rules "
        f"for '{GATED}' than approval_skipped at event {b2['idx']}",
        f"call {b3['call_id']} ('{GATED}'): approval_skipped leaves out rule 0 of its policy, "
        "which has no 'when' and so holds for every tool",
    ]


POLICY = {
    "store": "approvals.sqlite",
    "timeout_seconds": 600.0,
    "mode": "wait",
    "rules": [{"when": {}, "arguments": {"/force": True}}],
}
"""The validated ``[approvals]`` config of the ``ruled`` run, as its events record it."""


def _layer_digest(run_dir: Path) -> str:
    runtime = json.loads((run_dir / "runtime.json").read_bytes())
    (tool,) = [t for t in runtime["toolset"]["tools"] if t["name"] == GATED]
    assert tool["stack"][-1]["name"] == "approve"
    digest_: str = tool["stack"][-1]["config_digest"]
    return digest_


def test_requests_and_skips_record_the_policy_runtime_json_binds(
    ruled: tuple[Path, Approver],
) -> None:
    run_dir, _ = ruled
    events = trace_events(run_dir)
    recorded = [e["policy"] for e in events if e["type"].startswith("approval_") and "policy" in e]
    assert recorded == [POLICY, POLICY, POLICY]  # b1's request, b2's and b3's skips
    assert digest_json(POLICY) == _layer_digest(run_dir)


def _skip_b1(ev: list[dict[str, Any]], call: str) -> None:
    """Turn b1's request and decision into a skip like b2's."""
    at = ev.index(_of(ev, "b1", "approval_requested"))
    ev.remove(_of(ev, "b1", "approval_decided"))
    ev[at] = {**_of(ev, "b2", "approval_skipped"), "step": "b1", "call_id": call}


def test_rewriting_every_skips_rules_to_nothing_fails_on_the_bound_policy(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    calls = {s: _of(trace_events(run_dir), s, "tool_called")["call_id"] for s in ("b1", "b2", "b3")}

    def rewrite(ev: list[dict[str, Any]]) -> None:
        _skip_b1(ev, calls["b1"])
        for event in ev:
            if event["type"] == "approval_skipped":
                event["rules"] = []

    left_out = (
        "approval_skipped leaves out rule 0 of its policy, which has no 'when' and so holds "
        "for every tool"
    )
    assert _approvals(_forge(run_dir, tmp_path, rewrite)) == [
        f"call {calls['b1']} ('{GATED}'): {left_out}",
        f"call {calls['b1']} ('{GATED}'): rule 0 matches its arguments, but it ran without an "
        "approval request (approval_skipped claims no rule matched)",
        f"call {calls['b2']} ('{GATED}'): {left_out}",
        f"call {calls['b3']} ('{GATED}'): {left_out}",
    ]


def test_rewriting_the_recorded_policy_too_fails_naming_every_event(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    calls = {s: _of(trace_events(run_dir), s, "tool_called")["call_id"] for s in ("b1", "b2", "b3")}
    emptied = {**POLICY, "rules": []}

    def rewrite(ev: list[dict[str, Any]]) -> None:
        _skip_b1(ev, calls["b1"])
        for event in ev:
            if event["type"] == "approval_skipped":
                event["rules"], event["policy"] = [], emptied

    forged = _forge(run_dir, tmp_path, rewrite)
    skips = [e for e in trace_events(forged) if e["type"] == "approval_skipped"]
    assert [s["step"] for s in skips] == ["b1", "b2", "b3"]
    assert _approvals(forged) == [
        f"approval_skipped at event {s['idx']} for call {s['call_id']} records a policy for "
        f"'{GATED}' that digests to {digest_json(emptied)}, but runtime.json records its "
        f"approve layer's config digest as {_layer_digest(run_dir)} (the recorded policy is "
        "not the variant's)"
        for s in skips
    ]


def test_a_skip_without_its_policy_fails_naming_the_call(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = ruled
    b3 = _of(trace_events(run_dir), "b3", "approval_skipped")
    forged = _forge(
        run_dir, tmp_path, lambda ev: _of(ev, "b3", "approval_skipped").update(policy=None)
    )
    assert _approvals(forged) == [
        f"approval_skipped at event {b3['idx']} for call {b3['call_id']} records no policy, but "
        f"runtime.json records '{GATED}' with an approve layer whose config digest is "
        f"{_layer_digest(run_dir)}"
    ]


def test_a_skip_under_a_policy_without_rules_fails(
    recorded: tuple[Path, Approver], tmp_path: Path
) -> None:
    run_dir, _ = recorded
    events = trace_events(run_dir)
    call = _of(events, "b1", "tool_called")["call_id"]
    requested = _of(events, "b1", "approval_requested")

    def skip(ev: list[dict[str, Any]]) -> None:
        at = ev.index(_of(ev, "b1", "approval_requested"))
        ev.remove(_of(ev, "b1", "approval_decided"))
        only = ("request", "fingerprint", "arguments_digest", "rule", "mode")
        ev[at] = {k: v for k, v in requested.items() if k not in only}
        ev[at].update(type="approval_skipped", rules=[])

    forged = _forge(run_dir, tmp_path, skip)
    after = trace_events(forged)
    others = [_of(after, s, "approval_requested") for s in ("b2", "b3")]
    b1 = _of(after, "b1", "approval_skipped")
    assert _approvals(forged) == [
        *(
            f"approval_requested at event {r['idx']} for call {r['call_id']} names rule None, "
            f"which is not among the rules approval_skipped at event {b1['idx']} records for "
            f"'{GATED}'"
            for r in others
        ),
        f"call {call} ('{GATED}'): it ran without an approval request, but the policy of "
        f"'{GATED}' that runtime.json binds has no rules: every call of it is gated",
    ]


if str(FIXTURES) not in sys.path:  # the fixture tools module, for a worker rebuilding it
    sys.path.insert(0, str(FIXTURES))


def test_a_request_before_its_variants_first_skip_is_judged_by_that_skips_rules(
    ruled: tuple[Path, Approver], tmp_path: Path
) -> None:
    """The single pass keeps the request until the skip it is judged against comes."""
    run_dir, _ = ruled
    events = trace_events(run_dir)
    b1, b2 = _of(events, "b1", "approval_requested"), _of(events, "b2", "approval_skipped")
    assert b1["idx"] < b2["idx"]
    other = {"arguments": {"/force": False}, "index": 0, "when": {}}  # as read back: sorted
    forged = _forge(
        run_dir, tmp_path, lambda ev: _of(ev, "b1", "approval_requested").update(rule=other)
    )
    assert _approvals(forged)[0] == (
        f"approval_requested at event {b1['idx']} for call {b1['call_id']} names rule "
        f"{other!r}, which is not among the rules approval_skipped at event {b2['idx']} "
        f"records for '{GATED}'"
    )
