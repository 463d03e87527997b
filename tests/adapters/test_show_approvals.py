"""``toolproof show`` of a gated call: the decision, and the arguments the body ran with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolproof.adapters.cli.show import call_view, print_calls
from toolproof.adapters.html_report import render_html

CALL = {"tool": "delete_branch_approve", "arguments": {"branch": "f", "force": True}}
EVENTS = [
    {"type": "approval_requested", "call_id": "call_1"},
    {
        "type": "approval_decided",
        "call_id": "call_1",
        "decision": "approve_with_edits",
        "who": "ada",
        "channel": "cli",
        "reason": "no force",
        "edited_arguments": {"branch": "f", "force": False},
    },
    {"type": "tool_called", "call_id": "call_1", "call": CALL},
    {"type": "tool_returned", "call_id": "call_1", "result": {"ok": True, "value": "deleted f"}},
]
LINE = (
    "approval: approve_with_edits by ada (cli): no force; "
    'the body ran with {"branch": "f", "force": false}'
)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    lines = "".join(json.dumps(event) + "\n" for event in EVENTS)
    (tmp_path / "trace.jsonl").write_text(lines, encoding="utf-8")
    return tmp_path


def test_an_edited_approval_shows_the_arguments_the_body_ran_with(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [call] = call_view(run)
    assert call["approval"] == {
        "decision": "approve_with_edits",
        "who": "ada",
        "channel": "cli",
        "reason": "no force",
        "edited_arguments": {"branch": "f", "force": False},
    }
    print_calls([call])
    assert capsys.readouterr().out.splitlines() == [
        "calls (1)",
        '1. delete_branch_approve({"branch": "f", "force": true})',
        f"   {LINE}",
        '   ok "deleted f"',
    ]
    page = render_html("run_1", [], {"ok": True, "policy": "audit", "failures": []}, [call])
    assert "<div class='meta'>approval: approve_with_edits by ada (cli): no force; " in page
    assert "the body ran with {&quot;branch&quot;: &quot;f&quot;, &quot;force&quot;: false}" in page
