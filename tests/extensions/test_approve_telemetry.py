"""Approval-wait spans (issue 20 point 2): the wait for a decision is a span of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolproof import ApprovalRequest, load_toolset

HERE = Path(__file__).resolve().parent
GATED = "delete_branch_approve"


def config(tmp_path: Path) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{HERE}"\n\n'
        '[tools.delete_branch]\nextensions = [["approve"]]\n',
        encoding="utf-8",
    )
    return path


def named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [span for span in exporter.get_finished_spans() if span.name == name]
    return span


@pytest.mark.parametrize(("answer", "decision"), [(True, "approve"), (False, "deny")])
def test_the_wait_for_a_decision_is_a_child_span_of_the_gated_call(
    exporter: InMemorySpanExporter, tmp_path: Path, answer: bool, decision: str
) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Any:
        asked.append(request)
        return answer

    side = tmp_path / "side.txt"

    async def main() -> bool:
        async with load_toolset(config(tmp_path), approver=approver) as toolset:
            result = await toolset[GATED].call({"path": str(side), "branch": "b1"})
            return result.ok

    assert asyncio.run(main()) is answer
    gated = named(exporter, f"execute_tool {GATED}")
    wait = named(exporter, f"toolproof.approval.wait {GATED}")
    assert gated.context is not None and wait.parent is not None
    assert wait.parent.span_id == gated.context.span_id
    assert dict(wait.attributes or {}) == {
        "gen_ai.tool.name": GATED,
        "toolproof.approval.request": asked[0].request_id,
        "toolproof.approval.channel": "callback",
        "toolproof.approval.decision": decision,
    }
    bodies = [s for s in exporter.get_finished_spans() if s.name == "execute_tool delete_branch"]
    assert len(bodies) == (1 if answer else 0)  # a denied call's body never runs
