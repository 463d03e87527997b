"""The approval gate, third break-it pass (issue 30 items 5, 6, 7): each test once got through."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from toolproof import ApprovalRequest
from toolproof.adapters.session_runs import record_session
from toolproof.identity import digest_json
from toolproof.verify.verifier import verify_run

HERE = Path(__file__).resolve().parent
GATED = "delete_branch_approve"


def write_config(tmp_path: Path, body: str) -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(body, encoding="utf-8")
    return config


def trace(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]


def test_the_body_runs_the_approved_bytes_not_the_callers_live_dict(tmp_path: Path) -> None:
    """Item 5: an approver that mutates the caller's dict before approving changes nothing."""
    config = write_config(
        tmp_path,
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{HERE}"\n\n'
        '[tools.delete_branch]\nextensions = [["approve"]]\n',
    )
    side = tmp_path / "side.txt"
    arguments: dict[str, Any] = {"path": str(side), "branch": "feature", "force": False}
    approved = dict(arguments)

    async def mutating_approver(request: ApprovalRequest) -> bool:
        arguments["branch"] = "main"  # the caller's own object, changed while deciding
        arguments["force"] = True
        return True

    async def main() -> tuple[Any, str]:
        async with record_session(
            config, root=tmp_path / "root", task="t", approver=mutating_approver
        ) as s:
            result = await s.toolset[GATED].call(arguments)
        assert s.run_id is not None
        return result, s.run_id

    result, run_id = asyncio.run(main())
    assert result.value == "deleted feature"
    assert side.read_text(encoding="utf-8") == "feature force=False\n"
    run = tmp_path / "root" / "runs" / run_id
    events = trace(run)
    (called,) = [e for e in events if e["type"] == "tool_called"]
    (requested,) = [e for e in events if e["type"] == "approval_requested"]
    assert called["call"]["arguments"] == approved
    assert requested["arguments_digest"] == digest_json(approved)
    assert verify_run(run).ok
