"""``verify --chain`` shows each segment's acted-once notes (issue 35 point 2).

A named session crashes while calling ``look`` (a tool that declares nothing, so its
intent is logged); its trace is torn inside that call, which is thus cut. Resumed, the
agent asks the cut call again: it is recorded ``outcome_unknown`` in segment 2, which no
person reconciled. ``verify --chain`` still verifies the chain (a note does not fail) and
prints the note naming segment 2; ``--json`` lists it under that segment's ``notes``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cli_support import toolproof as cli
from test_resume_dropped import crash_then_resume


def unknown_note(root: Path) -> tuple[list[str], str]:
    run_ids = asyncio.run(crash_then_resume(root, 40, "bob"))
    plain = cli("verify", run_ids[-1], "--root", str(root))
    [note] = [line for line in plain.stdout.splitlines() if line.startswith("note [acted-once]")]
    return run_ids, note.removeprefix("note ")


def test_verify_chain_prints_the_unreconciled_outcome_of_its_segment(tmp_path: Path) -> None:
    run_ids, note = unknown_note(tmp_path)
    assert note.startswith("[acted-once] trace.jsonl: event ")
    assert " to 'look' (key idem_" in note
    ran = cli("verify", run_ids[-1], "--chain", "--root", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert [line for line in lines if line.startswith("note ")] == [
        f"note segment 2 {run_ids[-1]}: {note}"
    ]
    assert lines[-1] == "chain verified (2 segments)"


def test_verify_chain_json_lists_each_segments_notes(tmp_path: Path) -> None:
    run_ids, note = unknown_note(tmp_path)
    ran = cli("verify", run_ids[-1], "--chain", "--root", str(tmp_path), "--json")
    assert ran.returncode == 0, ran.stderr
    chain = json.loads(ran.stdout)
    assert chain["ok"] is True
    assert [(s["run_id"], s["notes"]) for s in chain["segments"]] == [
        (run_ids[1], [note]),
        (run_ids[0], []),
    ]
