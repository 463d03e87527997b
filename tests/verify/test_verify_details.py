"""verify re-derives an answer's details offline (issue 32 point 4): forged claims fail."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runs_support import remanifest

import toolproof
from toolproof.contract.evidence import Claim
from toolproof.contract.runs import Policy
from toolproof.evidence.grounding import DETAIL_RULE
from toolproof.identity import canonical_json, digest
from toolproof.verify.verifier import verify_run

RELEASE = "Version 2.1 was released on 2024-03-01 to 1,200 users."
FALSE = 'It shipped on 2 March 2024: "Version 2.1 was released" [call_1].'
TRUE = 'It shipped on 1 March 2024: "Version 2.1 was released" [call_1].'


async def read(name: str) -> str:
    """Read the release notes."""
    return RELEASE


def _record(root: Path, text: str, **options: Any) -> Path:
    tools = toolproof.Toolset()
    tools.add(toolproof.Tool.from_function(read))
    tools.seal()

    async def main() -> str:
        async with toolproof.record_session(tools, root=root, task="t", **options) as session:
            await session.call("read", {"name": "notes"})
            session.answer(text)
        return str(session.run_id)

    return root / "runs" / asyncio.run(main())


def _rechain(run_dir: Path, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """Edit the claim, then re-seal the trace chain, claims.json and the manifest."""
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]
    prev, lines, claims = None, [], []
    for idx, event in enumerate(events):
        if event["type"] == "claim_emitted":
            mutate(event["claim"])
            fields = {k: v for k, v in event["claim"].items() if k != "id"}
            event["claim"] = Claim.model_validate(fields).to_json()
            claims.append(event["claim"])
        event["idx"], event["prev"] = idx, prev
        line = canonical_json(event)
        prev = digest(line)
        lines.append(line + b"\n")
    (run_dir / "trace.jsonl").write_bytes(b"".join(lines))
    (run_dir / "claims.json").write_bytes(canonical_json(claims))
    return remanifest(run_dir)


def _grounding(run_dir: Path) -> list[str]:
    return [f.finding.message for f in verify_run(run_dir).failures if f.check == "grounding"]


def test_a_false_date_fails_verify_under_strict_and_audit_and_is_reported_when_permissive(
    tmp_path: Path,
) -> None:
    run = _record(tmp_path, FALSE)
    problem = (
        f"detail '2 March 2024' (2024-03-02) of the sentence {FALSE!r} is not in the result "
        f"of call_1 (rule: {DETAIL_RULE})"
    )
    for policy in (Policy.STRICT, Policy.AUDIT):
        (failure,) = verify_run(run, policy=policy).failures
        assert failure.check == "grounding"
        assert failure.finding.message.endswith(f"is derived but not validated: {problem}")
    permissive = verify_run(run, policy=Policy.PERMISSIVE)
    assert permissive.ok and permissive.report is not None
    (result,) = [r for r in permissive.report.results if r.check == "grounding"]
    assert [f.message.endswith(problem) for f in result.findings] == [True]


def test_a_claim_edited_to_validated_fails_naming_the_detail(tmp_path: Path) -> None:
    run = _record(tmp_path, FALSE)
    forged = _rechain(run, lambda claim: claim.update(status="validated", reason=""))
    messages = _grounding(forged)
    assert len(messages) == 1
    assert messages[0].endswith(
        f"is validated, but detail '2 March 2024' (2024-03-02) of the sentence {FALSE!r} is "
        f"not in the result of call_1 (rule: {DETAIL_RULE})"
    )


def test_a_claim_whose_reason_drops_the_detail_finding_fails(tmp_path: Path) -> None:
    run = _record(tmp_path, FALSE)
    forged = _rechain(run, lambda claim: claim.update(reason="the model was tired"))
    messages = _grounding(forged)
    assert messages[0].endswith("is derived but not validated: the model was tired")
    assert messages[1].endswith(
        f"does not give the reason: detail '2 March 2024' (2024-03-02) of the sentence "
        f"{FALSE!r} is not in the result of call_1 (rule: {DETAIL_RULE})"
    )


def test_a_forged_detail_support_fails(tmp_path: Path) -> None:
    run = _record(tmp_path, TRUE)
    assert verify_run(run).ok
    claim = json.loads((run / "claims.json").read_bytes())[0]
    start = RELEASE.index("2024-03-01")
    assert [(s["start"], s["end"]) for s in claim["supports"]] == [(0, 24), (start, start + 10)]

    def move(claim: dict[str, Any]) -> None:  # the detail's support, moved onto "1,200"
        at = RELEASE.index("1,200")
        support = claim["supports"][1]
        support.update(start=at, end=at + 5, sha256=digest(b"1,200"))
        claim["citations"][1]["text"] = "1,200"

    messages = _grounding(_rechain(run, move))
    evidence = claim["supports"][1]["evidence"]
    assert [m.split(") ", 1)[1] for m in messages] == [
        f"has no support for detail '1 March 2024' (2024-03-01), found at [{start}, "
        f"{start + 10}) of {evidence} in the result of call_1",
        f"support #1 [{RELEASE.index('1,200')}, {RELEASE.index('1,200') + 5}) of {evidence} "
        "is neither where one of its quotes is nor a detail of a cited sentence",
    ]


def test_a_quote_level_run_is_checked_as_before(tmp_path: Path) -> None:
    run = _record(tmp_path, FALSE, grounding="quote")
    assert verify_run(run).ok
    spec = json.loads((run / "spec.json").read_bytes())
    assert spec["reasoner"]["params"]["grounding"] == {"level": "quote", "min_quote_words": 3}
