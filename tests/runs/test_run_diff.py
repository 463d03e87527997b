from __future__ import annotations

from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset, run

from toolproof.errors import InputError
from toolproof.runs.diff import diff_runs, first_trace_difference


def test_diff_names_changed_files_and_first_event(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    raw = base_spec()
    raw["steps"][1]["arguments"] = {"item": "apple"}
    second = run(tmp_path, raw, make_toolset(Counter()))
    result = diff_runs(first.path, second.path)
    assert not result.identical
    changed = {path for path, status in result.files.items() if status != "same"}
    assert {"spec.json", "plan.json", "trace.jsonl", "claims.json"} <= changed
    assert result.files["runtime.json"] == "same"
    assert result.first_event is not None
    assert result.first_event["idx"] == 6
    assert result.first_event["fields"] == ["call", "call_id"]
    assert (
        result.first_event["why"] == "event 6 (tool_called vs tool_called) differs in call, call_id"
    )


def test_diff_of_a_run_with_itself_is_identical(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    result = diff_runs(first.path, first.path)
    assert result.identical
    assert set(result.files.values()) == {"same"}
    assert result.first_event is None


def test_first_trace_difference_reports_a_shorter_trace() -> None:
    assert first_trace_difference(b'{"type":"a"}\n', b'{"type":"a"}\n{"type":"b"}\n') == {
        "idx": 1,
        "why": "the first trace ends at event 1",
        "fields": [],
        "a_type": None,
        "b_type": "b",
    }


def test_diff_refuses_a_directory_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"manifest\.json is missing or invalid"):
        diff_runs(tmp_path, tmp_path)
