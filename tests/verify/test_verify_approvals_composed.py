"""The ``approvals`` check on variants composed on top of ``approve`` (``t_approve_timeout``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runs_support import remanifest

from toolproof import ApprovalRequest, load_toolset
from toolproof.contract.runs import RunSpec
from toolproof.identity import canonical_json, digest
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

FIXTURES = Path(__file__).resolve().parent.parent / "extensions"
COMPOSED = "delete_branch_approve_timeout"


async def _approve(request: ApprovalRequest) -> bool:
    return True


def _run(tmp_path: Path) -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{FIXTURES}"\n\n'
        "[tools.delete_branch]\n"
        'extensions = [["approve", {name = "timeout", config = {seconds = 30}}]]\n',
        encoding="utf-8",
    )
    side = str(tmp_path / "side.txt")
    spec = RunSpec.model_validate(
        {
            "task": "Delete a branch.",
            "steps": [{"id": "b1", "tool": COMPOSED, "arguments": {"path": side, "branch": "b1"}}],
        }
    )

    async def main() -> Path:
        async with load_toolset(config, approver=_approve) as toolset:
            outcome = await execute_run(spec, root=tmp_path / "root", toolset=toolset)
        return outcome.path

    return asyncio.run(main())


def _drop_approvals(run_dir: Path) -> Path:
    """Remove every approval event, forge a consistent chain and manifest; the new path."""
    lines = (run_dir / "trace.jsonl").read_bytes().splitlines()
    events = [json.loads(line) for line in lines]
    kept = [e for e in events if not e["type"].startswith("approval_")]
    assert len(kept) == len(events) - 2  # the request and its decision
    prev, out = None, []
    for idx, event in enumerate(kept):
        event["idx"], event["prev"] = idx, prev
        line = canonical_json(event)
        prev = digest(line)
        out.append(line + b"\n")
    (run_dir / "trace.jsonl").write_bytes(b"".join(out))
    return remanifest(run_dir)


def test_a_composed_gated_call_whose_approval_events_were_dropped_fails(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    assert verify_run(run_dir).ok
    events: list[dict[str, Any]] = [
        json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()
    ]
    call = next(e for e in events if e["type"] == "tool_called")["call_id"]
    forged = _drop_approvals(run_dir)
    failures = [f.finding.message for f in verify_run(forged).failures if f.check == "approvals"]
    assert failures == [
        f"call {call} ('{COMPOSED}'): it ran with no approval record (approval_requested or "
        "approval_skipped), although it is an approve variant: every call of one records one"
    ]
