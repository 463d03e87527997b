from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runs_support import Counter, base_spec, make_toolset, remanifest, run

from toolproof.contract.evidence import Claim
from toolproof.contract.runs import Plan
from toolproof.identity import canonical_json, digest
from toolproof.verify.checks import CHECKS, run_checks
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import RunView


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return run(tmp_path, base_spec(), make_toolset(Counter())).path


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))


MUTATIONS: dict[str, Callable[[Path], None]] = {
    "flip": _flip,
    "truncate": lambda p: p.write_bytes(p.read_bytes()[:-1]),
    "append": lambda p: p.write_bytes(p.read_bytes() + b"\n"),
    "delete": lambda p: p.unlink(),
    "overwrite": lambda p: p.write_bytes(b"{}"),
}
FILES = [
    "spec.json",
    "plan.json",
    "runtime.json",
    "trace.jsonl",
    "claims.json",
    "report.json",
    "timings.json",
    "manifest.json",
    "evidence.pack",
    "evidence.idx",
]


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("name", FILES)
def test_every_mutation_of_every_file_fails_the_manifest_check(
    run_dir: Path, name: str, mutation: str
) -> None:
    MUTATIONS[mutation](run_dir / name)
    verification = verify_run(run_dir)
    assert not verification.ok
    first = verification.failures[0]
    assert (first.check, first.finding.file) == ("manifest", name)
    assert verification.report is None  # nothing else is trusted


def test_messages_say_what_happened(run_dir: Path) -> None:
    (run_dir / "plan.json").unlink()
    (run_dir / "extra.txt").write_text("x", encoding="utf-8")
    messages = [str(f) for f in verify_run(run_dir).failures]
    assert messages == [
        "[manifest] extra.txt: extra.txt is not listed in the manifest (an added file)",
        "[manifest] plan.json: plan.json is listed but missing",
    ]


def test_a_symlink_in_the_run_is_refused(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("secret", encoding="utf-8")
    (run_dir / "link").symlink_to(tmp_path / "outside")
    failure = verify_run(run_dir).failures[0]
    assert str(failure) == "[manifest] link: link is not a regular file (symlinks are not allowed)"


def test_a_damaged_pack_under_a_forged_manifest_fails_its_check_in_one_line(
    run_dir: Path,
) -> None:
    pack = run_dir / "evidence.pack"
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0x01  # the last item's last byte
    pack.write_bytes(bytes(data))
    checks = _checks(remanifest(run_dir))
    [message] = [text for check, text in checks if check == "evidence-digests"]
    assert re.fullmatch(
        r"evidence\.pack at byte \d+: item 3's bytes do not hash to its digest [0-9a-f]{64}",
        message,
    )


def _rechain(run_dir: Path, mutate: Callable[[list[dict[str, Any]]], None]) -> Path:
    """Edit trace events, then forge a consistent chain, claims.json and manifest."""
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]
    mutate(events)
    prev = None
    lines = []
    claims = []
    for idx, event in enumerate(events):
        event["idx"], event["prev"] = idx, prev
        if event["type"] == "claim_emitted":
            fields = {k: v for k, v in event["claim"].items() if k != "id"}
            event["claim"] = Claim.model_validate(fields).to_json()
            claims.append(event["claim"])
        line = canonical_json(event)
        prev = digest(line)
        lines.append(line + b"\n")
    (run_dir / "trace.jsonl").write_bytes(b"".join(lines))
    (run_dir / "claims.json").write_bytes(canonical_json(claims))
    return remanifest(run_dir)


def _checks(run_dir: Path) -> list[tuple[str, str]]:
    return [(f.check, f.finding.message) for f in verify_run(run_dir).failures]


def _claim(events: list[dict[str, Any]], n: int = 0) -> dict[str, Any]:
    return [e for e in events if e["type"] == "claim_emitted"][n]["claim"]


def test_forged_manifest_still_fails_the_chain(run_dir: Path) -> None:
    lines = (run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "trace.jsonl").write_bytes(b"".join(lines[:3] + lines[4:]))
    forged = remanifest(run_dir)
    checks = _checks(forged)
    assert checks[0] == (
        "trace-chain",
        "event at line 4 has idx 4, expected 3 (events were removed, added or reordered)",
    )
    assert ("trace-chain", checks[1][1]) == checks[1]
    assert "the hash chain is broken" in checks[1][1]


def test_support_out_of_bounds_fails_span_check(run_dir: Path) -> None:
    forged = _rechain(run_dir, lambda ev: _claim(ev)["supports"][0].update(end=10_000))
    found = [c for c in _checks(forged) if c[0] == "support-spans"]
    assert len(found) == 1
    assert found[0][1].endswith("is outside evidence/" + _claim_hex(forged) + " (75 bytes)")


def _claim_hex(run_dir: Path) -> str:
    claims = json.loads((run_dir / "claims.json").read_bytes())
    return str(claims[0]["supports"][0]["evidence"]).removeprefix("evidence_")


def test_snippet_digest_mismatch_fails_span_check(run_dir: Path) -> None:
    forged = _rechain(run_dir, lambda ev: _claim(ev)["supports"][0].update(sha256=digest(b"13")))
    found = [c for c in _checks(forged) if c[0] == "support-spans"]
    assert found[0][1].endswith(f"do not hash to {digest(b'13')}")


def test_citation_that_misquotes_fails_grounding(run_dir: Path) -> None:
    forged = _rechain(run_dir, lambda ev: _claim(ev)["citations"][0].update(text="13"))
    found = [c for c in _checks(forged) if c[0] == "grounding"]
    assert found[0][1].endswith("citation of support #0 does not match the cited bytes")


def test_validated_claim_without_supports_fails_grounding(run_dir: Path) -> None:
    def strip(events: list[dict[str, Any]]) -> None:
        _claim(events).update(supports=[], citations=[])

    found = [c for c in _checks(_rechain(run_dir, strip)) if c[0] == "grounding"]
    assert found[0][1].endswith(
        "has 0 supports, min_supports is 1; mark it insufficient_evidence or cite more evidence"
    )


def test_call_id_not_matching_call_fails_linkage(run_dir: Path) -> None:
    def swap(events: list[dict[str, Any]]) -> None:
        events[1]["call_id"] = "call_" + "0" * 64
        events[2]["call_id"] = "call_" + "0" * 64

    found = [c for c in _checks(_rechain(run_dir, swap)) if c[0] == "call-linkage"]
    assert found[0][1].startswith("event 1: call_id call_000")


def test_removed_finalize_fails_finalize_and_evidence_value_mismatch(run_dir: Path) -> None:
    def cut(events: list[dict[str, Any]]) -> None:
        del events[-2:]
        events[2]["result"]["value"]["count"] = 13

    checks = dict(_checks(_rechain(run_dir, cut)))
    assert checks["finalize"].startswith("the trace does not end with the finalize step")
    assert "does not hold the value returned by call_" in checks["evidence-digests"]
    assert checks["report"].startswith("report.json differs from the report recomputed now")


def test_lower_budget_in_spec_fails_budget_and_plan_edits_fail_plan(run_dir: Path) -> None:
    spec = json.loads((run_dir / "spec.json").read_bytes())
    spec["budgets"]["tool_calls"] = 1
    (run_dir / "spec.json").write_bytes(canonical_json(spec))
    plan = json.loads((run_dir / "plan.json").read_bytes())
    plan["nodes"][0]["arguments"] = {"item": "plum"}
    plan.pop("id")
    (run_dir / "plan.json").write_bytes(Plan.model_validate(plan).canonical())
    checks = _checks(remanifest(run_dir))
    assert ("budget", "3 tool calls exceed the budget of 1") in checks
    assert (
        "plan",
        "node 'apples' differs from the spec's step 'apples'; re-run the spec to get a sound plan",
    ) in checks


def test_edited_report_fails_report_check(run_dir: Path) -> None:
    report = json.loads((run_dir / "report.json").read_bytes())
    report["results"] = report["results"][1:]
    report["sequence"] = report["sequence"][1:]
    report.pop("id")
    from toolproof.contract.runs import Report

    (run_dir / "report.json").write_bytes(Report.model_validate(report).canonical())
    assert [c for c, _ in _checks(remanifest(run_dir))] == ["report"]


def test_report_identity_covers_the_check_sequence(run_dir: Path) -> None:
    view = RunView(run_dir)
    report = run_checks(view, "strict")  # type: ignore[arg-type]
    reordered = run_checks(view, "strict", CHECKS[::-1])  # type: ignore[arg-type]
    fewer = run_checks(view, "strict", CHECKS[:-1])  # type: ignore[arg-type]
    assert report.outcome == reordered.outcome == fewer.outcome == "passed"
    assert len({report.id, reordered.id, fewer.id}) == 3
    assert report.sequence == [
        "schema",
        "plan",
        "trace-chain",
        "call-linkage",
        "support-links",
        "grounding",
        "evidence-digests",
        "support-spans",
        "required-steps",
        "finalize",
        "budget",
        "failure-honesty",
        "approvals",
    ]
    assert (run_dir / "report.json").read_bytes() == report.canonical()


def test_every_policy_changes_an_outcome(tmp_path: Path) -> None:
    raw = base_spec(budgets={"tool_calls": 1})
    raw["steps"][0]["arguments"] = {"item": "pear"}  # a warning (failed step) and an error
    stopped = run(tmp_path, raw, make_toolset(Counter())).path
    failed = run(
        tmp_path,
        base_spec(steps=[base_spec()["steps"][0] | {"arguments": {"item": "pear"}}], reasoner={}),
        make_toolset(Counter()),
    ).path
    outcome = {
        (name, policy): verify_run(path, policy=policy).ok  # type: ignore[arg-type]
        for name, path in (("stopped", stopped), ("failed", failed))
        for policy in ("strict", "audit", "permissive")
    }
    assert outcome == {
        ("stopped", "strict"): False,  # budget stop: an error
        ("stopped", "audit"): False,
        ("stopped", "permissive"): True,  # only integrity (critical) fails
        ("failed", "strict"): False,  # a failed step: a warning
        ("failed", "audit"): True,
        ("failed", "permissive"): True,
    }
