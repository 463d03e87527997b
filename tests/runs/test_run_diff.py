from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
from cli_support import Ran, toolproof
from runs_support import Counter, base_spec, make_toolset, run

from toolproof.errors import InputError
from toolproof.runs.diff import (
    diff_runs,
    first_trace_difference,
    first_trace_file_difference,
    shared_file_prefix,
    shared_prefix,
)


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


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (b'{"type":"a"}\n', b'{"type":"a"}\n{"type":"b"}\n'),  # the first ends early
        (b'{"type":"a","x":1}\n', b'{"type":"a","x":2}\n'),  # a field differs
        (b'{"type":"a"}\n', b'{"type":"a"}'),  # the second has no final newline
        (b"", b'{"type":"a"}\n'),  # the first is empty
        (b'{"type":"a"}\n', b'{"type":"a"}\n'),  # equal
    ],
)
def test_the_file_forms_give_what_the_bytes_forms_give(tmp_path: Path, a: bytes, b: bytes) -> None:
    path_a, path_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    path_a.write_bytes(a)
    path_b.write_bytes(b)
    assert first_trace_file_difference(path_a, path_b) == first_trace_difference(a, b)
    assert shared_file_prefix(path_a, path_b) == shared_prefix(a, b)


def test_two_big_traces_are_compared_a_line_at_a_time(tmp_path: Path) -> None:
    """Two 39 MB traces differing at their last event: the diff holds a block and a line."""
    line = b'{"type":"tool_returned","value":"' + b"x" * 1200 + b'","n":%d}\n'
    events = 32_000
    path_a, path_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with path_a.open("wb") as file_a, path_b.open("wb") as file_b:
        for n in range(events):
            file_a.write(line % n)
            file_b.write(line % (n if n < events - 1 else -1))
    tracemalloc.start()
    try:
        first = first_trace_file_difference(path_a, path_b)
        shared = shared_file_prefix(path_a, path_b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert path_a.stat().st_size > 39_000_000
    assert first == {
        "idx": events - 1,
        "why": f"event {events - 1} (tool_returned vs tool_returned) differs in n",
        "fields": ["n"],
        "a_type": "tool_returned",
        "b_type": "tool_returned",
    }
    assert shared == events - 1
    assert peak < 8 << 20  # two 1 MiB blocks and a line of each, never the traces


def _diff(a: Path, b: Path) -> Ran:
    return toolproof("diff", str(a), str(b), env={"COLUMNS": "400"})


def test_diff_refuses_a_tampered_copy_and_exits_0_only_when_identical(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    same = _diff(first.path, first.path)
    assert (same.returncode, same.stdout.splitlines()[0]) == (0, "the runs are identical")
    trace = first.path / "trace.jsonl"
    size = trace.stat().st_size
    cut = tmp_path / "cut"
    shutil.copytree(first.path, cut)
    (cut / "trace.jsonl").write_bytes(trace.read_bytes()[: size // 2])
    refused = _diff(first.path, cut)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.replace("\n", "") == (
        f"error: {cut}: [manifest] trace.jsonl: trace.jsonl has size {size // 2} bytes, the "
        f"manifest says {size} (truncated, appended or replaced; refused by size, not read); "
        "a run whose files do not match its manifest is not compared (run `toolproof verify` "
        "on it)"
    )
    noise = tmp_path / "noise"
    shutil.copytree(first.path, noise)
    (noise / "trace.jsonl").write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))
    replaced = _diff(noise, first.path)
    assert replaced.returncode == 2
    assert replaced.stderr.replace("\n", "").startswith(
        f"error: {noise}: [manifest] trace.jsonl: trace.jsonl has digest sha256:"
    )
    assert "the manifest says sha256:" in replaced.stderr.replace("\n", "")


def test_diff_of_two_different_runs_exits_2(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    raw = base_spec()
    raw["steps"][1]["arguments"] = {"item": "apple"}
    second = run(tmp_path, raw, make_toolset(Counter()))
    differ = _diff(first.path, second.path)
    assert differ.returncode == 2
    assert (
        "first trace difference: event 6 (tool_called vs tool_called) differs in call, call_id"
        in differ.stdout.splitlines()
    )
    as_json = toolproof("diff", str(first.path), str(second.path), "--json")
    assert (as_json.returncode, json.loads(as_json.stdout)["identical"]) == (2, False)


def test_show_prints_the_verdict_first_and_exits_2_on_a_tampered_run(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    good = toolproof("show", str(first.path), env={"COLUMNS": "400"})
    assert (good.returncode, good.stdout.splitlines()[0]) == (0, "verified (strict policy)")
    cut = tmp_path / "cut"
    shutil.copytree(first.path, cut)
    size = (cut / "trace.jsonl").stat().st_size
    (cut / "trace.jsonl").write_bytes((first.path / "trace.jsonl").read_bytes()[: size // 2])
    shown = toolproof("show", str(cut), env={"COLUMNS": "400"})
    assert shown.returncode == 2
    assert shown.stdout.splitlines()[:2] == [
        "verification FAILED (1 failure): what follows is what the files say, not trusted; "
        "run `toolproof verify` on this run",
        f"  [manifest] trace.jsonl: trace.jsonl has size {size // 2} bytes, the manifest says "
        f"{size} (truncated, appended or replaced; refused by size, not read)",
    ]
    as_json = toolproof("show", str(cut), "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["verification"]["ok"] is False
    (cut / "manifest.json").unlink()
    gone = toolproof("show", str(cut), env={"COLUMNS": "400"})
    assert gone.returncode == 2
    assert gone.stdout.splitlines()[1] == (
        "  [manifest] manifest.json: manifest.json is missing: the run cannot be trusted"
    )
