"""``toolproof show`` of an agent run is a timeline; ``toolproof diff`` of two names the model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import Ran, toolproof
from test_agent_model_turns import _pai_agent, _record

from toolproof.adapters.cli.app import out_console
from toolproof.adapters.cli.timeline import (
    PREVIEW_CHARS,
    print_timeline,
    timeline_heading,
    turn_summary,
)
from toolproof.runs.diff import diff_runs

MODEL = "model pydantic-ai function:function:respond:"


def _cli(*args: str) -> Ran:
    return toolproof(*args)


def test_show_prints_turns_then_their_calls_then_the_answer_with_its_bytes(
    tmp_path: Path,
) -> None:
    run = _record(tmp_path, _pai_agent([]))
    done = _cli("show", str(run))
    assert done.returncode == 0, done.stderr
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    assert lines.pop(0) == "verified (audit policy)"  # the verdict first
    assert lines[0] == "timeline (3 model turns, 3 tool calls)"
    turn = [n for n, line in enumerate(lines) if line.startswith("model turn ")]
    assert [lines[n].split(" (")[0] for n in turn] == [
        "model turn 1 pydantic-ai function:function:respond:",
        "model turn 2 pydantic-ai function:function:respond:",
        "model turn 3 pydantic-ai function:function:respond:",
    ]
    assert lines[turn[0] + 1].strip() == "→ calls read_file, calls lookup"
    # each call by both its names: call_N and [the id the model gave it]
    second = re.fullmatch(r"call_2 \[(pyd_ai_[0-9a-f]{32})\] (.*)", lines[turn[0] + 2].strip())
    assert second is not None
    assert second.group(2) == 'lookup({"item": "pear"}) ok {"count": 4, "item": "pear"}'
    first = re.fullmatch(r"call_1 \[(pyd_ai_[0-9a-f]{32})\] (.*)", lines[turn[0] + 3].strip())
    assert first is not None
    assert first.group(2).startswith('read_file({"path": "README.md"}) ok ')
    assert lines[turn[2] + 1].strip() == '→ says "The README was \\"Created by Ada\\" [call_3]."'
    answer = lines.index("answer")
    assert answer > turn[2]
    assert "(derived, validated)" in lines[answer + 1]
    assert any("⟦Created by Ada⟧" in line for line in lines[answer:])
    document = json.loads(_cli("show", str(run), "--json").stdout)
    kinds = [(e["kind"], e["step"]) for e in document["timeline"]]
    assert kinds == [
        ("model_turn", "turn-00000001"),
        ("call", "call-00000002"),
        ("call", "call-00000001"),
        ("model_turn", "turn-00000002"),
        ("call", "call-00000003"),
        ("model_turn", "turn-00000003"),
    ]
    assert document["timeline"][0]["request"]["file"].startswith("evidence/")
    linked = [
        (e["call"], e["model_call_id"], e["model_turn"])
        for e in document["timeline"]
        if e["kind"] == "call"
    ]
    assert linked[:2] == [
        ("call_2", second.group(1), "turn-00000001"),
        ("call_1", first.group(1), "turn-00000001"),
    ]
    assert (linked[2][0], linked[2][2]) == ("call_3", "turn-00000002")
    # issue 31 point 3: --limit keeps the first entries and still counts every one
    limited = _cli("show", str(run), "--limit", "2").stdout.splitlines()
    assert limited[1] == "timeline (3 model turns, 3 tool calls)"
    assert [line.strip()[:12] for line in limited[2:5]] == [
        "model turn 1",
        "→ calls read",
        "call_2 [pyd_",
    ]
    assert limited[5] == "… 4 more timeline entries not shown (--limit; --limit 0 shows all)"
    assert limited[6] == "answer"
    page = json.loads(_cli("show", str(run), "--json", "--limit", "2").stdout)
    assert [(e["kind"], e["step"]) for e in page["timeline"]] == kinds[:2]
    assert page["timeline_total"] == 6
    assert "timeline_total" not in document


def test_two_live_runs_of_one_agent_differ_by_the_model_declared_as_varying(
    tmp_path: Path,
) -> None:
    first = _record(tmp_path / "a", _pai_agent([]))
    second = _record(tmp_path / "b", _pai_agent([]))
    diff = diff_runs(first, second)
    assert diff.varying == {MODEL: ["model"]}
    assert diff.first_event is not None
    assert (diff.first_event["idx"], diff.first_event["source"]) == (1, MODEL)
    assert diff.explained is True
    assert {path: diff.files[path] for path in ("spec.json", "plan.json")} == {
        "spec.json": "same",
        "plan.json": "same",
    }
    # runtime.json names each live session (its stamp): the same runtime but for that
    runtimes = [json.loads((run / "runtime.json").read_bytes()) for run in (first, second)]
    for runtime in runtimes:
        del runtime["id"], runtime["session"]
    assert runtimes[0] == runtimes[1]
    done = _cli("diff", str(first), str(second))
    assert done.returncode == 2, done.stderr  # they differ (explained: variation)
    text = " ".join(done.stdout.split())
    assert f"declared non-deterministic sources: {MODEL} (varies: model)" in text
    assert "the difference comes from a declared non-deterministic source" in text


def test_turn_summaries_read_each_framework_and_chat_completions() -> None:
    chat = {"choices": [{"message": {"content": "Hi there", "tool_calls": []}}]}
    assert turn_summary("http", json.dumps(chat).encode()) == 'says "Hi there"'
    call = {"type": "function_call", "name": "lookup"}
    assert turn_summary("openai-agents", json.dumps({"output": [call]}).encode()) == "calls lookup"
    assert turn_summary("http", b"not json at all") == "not json at all"


def test_a_turns_text_is_shown_as_written_not_as_ascii_escapes() -> None:
    text = "Le café est « fermé » " + "x" * 80  # longer than PREVIEW_CHARS: cut, with …
    response = {"parts": [{"part_kind": "text", "content": text}]}
    shown = 'says "Le café est « fermé » ' + "x" * (PREVIEW_CHARS - 23) + '…"'
    assert turn_summary("pydantic-ai", json.dumps(response).encode()) == shown
    message = {"type": "message", "content": [{"text": "Olá"}]}
    assert turn_summary("openai-agents", json.dumps({"output": [message]}).encode()) == (
        'says "Olá"'
    )
    chat = {"choices": [{"message": {"content": 'Sí, "dos"'}}]}
    assert turn_summary("http", json.dumps(chat).encode()) == 'says "Sí, \\"dos\\""'


def test_a_calls_json_result_is_shown_as_written_not_as_ascii_escapes() -> None:
    call = {"kind": "call", "call": "call_1", "tool": "city", "arguments": {"q": "Málaga"}}
    entries = [{**call, "ok": True, "value": {"città": "Málaga"}, "failure": None}]
    with out_console.capture() as captured:
        print_timeline(entries)
    assert captured.get().splitlines() == [
        "timeline (0 model turns, 1 tool call)",
        '     call_1 city({"q": "Málaga"}) ok {"città": "Málaga"}',
    ]


def test_the_timeline_heading_counts_one_in_the_singular() -> None:
    one = [{"kind": "model_turn"}, {"kind": "call"}]
    assert timeline_heading(one) == "timeline (1 model turn, 1 tool call)"
    assert timeline_heading([{"kind": "model_turn"}]) == "timeline (1 model turn, 0 tool calls)"


def test_a_call_shows_its_model_id_and_the_turn_that_asked_when_not_the_one_above() -> None:
    def turn(step: str) -> dict[str, Any]:
        return {
            "kind": "model_turn",
            "step": step,
            "source": "http",
            "model": "POST /v1/chat/completions",
            "status": 200,
            "response": {"size": 10},
            "summary": "calls city",
        }

    call = {"kind": "call", "tool": "city", "arguments": {}, "ok": True, "value": "Oslo"}
    entries = [
        turn("turn-00000001"),
        {**call, "call": "call_1", "model_call_id": "call_Ab", "model_turn": "turn-00000001"},
        turn("turn-00000002"),
        {**call, "call": "call_2", "model_call_id": "call_Cd", "model_turn": "turn-00000001"},
    ]
    with out_console.capture() as captured:
        print_timeline(entries)
    lines = [line.strip() for line in captured.get().splitlines()]
    assert lines[3:5] == [
        "call_1 [call_Ab] city({}) ok Oslo",
        "model turn 2 http POST /v1/chat/completions HTTP 200 (10 response bytes)",
    ]
    assert lines[6] == "call_2 [call_Cd] city({}) (asked by model turn 1) ok Oslo"


def test_show_of_an_agent_run_without_its_evidence_index_refuses_in_one_line(
    tmp_path: Path,
) -> None:
    run = _record(tmp_path, _pai_agent([]))
    (run / "evidence.idx").unlink()
    done = _cli("show", str(run))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: evidence.idx is missing: a run's evidence is evidence.pack read through "
        "evidence.idx, and it has one without the other"
    ]


V1 = Path(__file__).resolve().parents[1] / "fixtures" / "agent_runs_v1" / "runs"
READ = 'read_file({"path": "README.md"}) ok toolproof records every tool call. Created by Ada.'


@pytest.mark.parametrize(
    ("run_id", "turn", "model_id"),
    [
        (
            "run_ad9a6db80e5e938863361fc92a563311cee3caf1fc3c4e5d83ee3a0d5bb2a01d",
            "pydantic-ai function:function:respond: (924 response bytes)",
            "a",
        ),
        (
            "run_f72337e6051a4d8e2abd025851c89a0d580a055ad10ff4a1036f530dc647075e",
            "openai-agents ScriptedAgentsModel (400 response bytes)",
            "a",
        ),
        (  # LangChain's ChatOpenAI: its turns are the HTTP transport's
            "run_2d3e53b594d173d477007fbfaada25b19ba55d91bfe7dfd66ea0ff3b958a0254",
            "http POST http://127.0.0.1:8047/v1/chat/completions HTTP 200 (391 response bytes)",
            "call_readme",
        ),
    ],
    ids=["pydantic-ai", "openai-agents", "langchain"],
)
def test_show_draws_each_frameworks_turn_then_its_call_by_both_ids(
    run_id: str, turn: str, model_id: str
) -> None:
    done = _cli("show", str(V1 / run_id))
    assert done.returncode == 0, done.stderr
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    assert lines.pop(0) == "verified (audit policy)"  # the verdict first
    assert lines[:4] == [
        "timeline (2 model turns, 1 tool call)",
        f"model turn 1 {turn}",
        "   → calls read_file",
        f"     call_1 [{model_id}] {READ}",
    ]
    assert lines[4].startswith("model turn 2 ")
    document = json.loads(_cli("show", str(V1 / run_id), "--json").stdout)
    (call,) = [e for e in document["timeline"] if e["kind"] == "call"]
    assert (call["call"], call["model_call_id"], call["model_turn"]) == (
        "call_1",
        model_id,
        "turn-00000001",
    )
