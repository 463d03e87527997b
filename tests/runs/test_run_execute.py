from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from runs_support import Counter, base_spec, make_toolset, run, run_files

from toolproof import load_toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.contract.runs import RunSpec
from toolproof.contract.trace import TRACE_EVENT_ADAPTER
from toolproof.errors import VerificationError
from toolproof.identity import digest
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"


def _events(run_dir: Path) -> list[object]:
    lines = (run_dir / "trace.jsonl").read_bytes().splitlines()
    return [TRACE_EVENT_ADAPTER.validate_json(line) for line in lines]


def test_run_writes_the_documented_layout(tmp_path: Path) -> None:
    counter = Counter()
    outcome = run(tmp_path, base_spec(), make_toolset(counter))
    assert outcome.report.outcome == "passed"
    assert (counter.calls, outcome.live_calls) == (3, 3)
    assert outcome.path == tmp_path / "runs" / outcome.run_id
    files = run_files(outcome.path)
    assert len(RunEvidence.open(outcome.path).names()) == 3
    assert files == [
        "claims.json",
        "evidence.idx",
        "evidence.pack",
        "manifest.json",
        "plan.json",
        "report.json",
        "runtime.json",
        "spec.json",
        "timings.json",
        "trace.jsonl",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no temp dir left
    assert verify_run(outcome.path).ok


def test_trace_is_ordered_and_hash_chained(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    lines = (outcome.path / "trace.jsonl").read_bytes().splitlines()
    events = _events(outcome.path)
    assert [event.idx for event in events] == list(range(len(events)))  # type: ignore[attr-defined]
    assert events[0].prev is None  # type: ignore[attr-defined]
    for before, event in zip(lines, events[1:], strict=False):
        assert event.prev == digest(before)  # type: ignore[attr-defined]
    kinds = [event.type for event in events[:5]]  # type: ignore[attr-defined]
    assert kinds == [
        "step_started",
        "tool_called",
        "tool_returned",
        "evidence_registered",
        "step_finished",
    ]
    called = events[1]
    assert called.call_id == called.call.id  # type: ignore[attr-defined]
    assert called.call.step == "apples"  # type: ignore[attr-defined]
    assert [e.type for e in events[-2:]] == ["step_started", "step_finished"]  # type: ignore[attr-defined]
    assert events[-1].step == "finalize"  # type: ignore[attr-defined]


def test_claims_cite_the_exact_bytes_of_tool_values(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    claims = json.loads((outcome.path / "claims.json").read_bytes())
    assert [c["statement"] for c in claims] == [
        "There are 12 apples on shelf A1.",
        "19 fruit in all.",
    ]
    first = claims[0]
    assert (first["type"], first["status"]) == ("derived", "validated")
    data = RunEvidence.open(outcome.path).read(first["supports"][0]["evidence"])
    spans = [data[s["start"] : s["end"]] for s in first["supports"]]
    assert spans == [b"12", b"A1"]
    assert [c["text"] for c in first["citations"]] == ["12", "A1"]
    assert first["supports"][0]["sha256"] == digest(b"12")


def test_string_results_are_stored_as_raw_utf8(tmp_path: Path) -> None:
    spec = base_spec(
        steps=[{"id": "report", "tool": "text", "arguments": {"topic": "pear"}}],
        reasoner={
            "params": {"claims": [{"statement": "{r}", "cite": {"r": "steps.report.value"}}]}
        },
    )
    outcome = run(tmp_path, spec, make_toolset(Counter()))
    stored = RunEvidence.open(outcome.path)
    (name,) = stored.names()
    assert stored.read(name) == b"Report on pear. The pear shelf is full. Nothing else to add."
    assert outcome.outcome.claims[0].supports[0].end == stored.size(name)


def test_same_spec_and_seed_give_the_same_run_id_and_reuse(tmp_path: Path) -> None:
    first = run(tmp_path / "a", base_spec(), make_toolset(Counter()))
    again = run(tmp_path / "a", base_spec(), make_toolset(Counter()))
    elsewhere = run(tmp_path / "b", base_spec(), make_toolset(Counter()))
    assert first.run_id == again.run_id == elsewhere.run_id
    assert (first.reused, again.reused) == (False, True)
    assert len(list((tmp_path / "a" / "runs").iterdir())) == 1
    reseeded = run(tmp_path / "a", base_spec(seed=2), make_toolset(Counter()))
    assert reseeded.run_id != first.run_id


def test_changed_tool_description_changes_descriptor_and_run_id(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    changed = run(tmp_path, base_spec(), make_toolset(Counter(), description="Stock, v2."))
    assert changed.run_id != first.run_id
    runtime_a = json.loads((first.path / "runtime.json").read_bytes())
    runtime_b = json.loads((changed.path / "runtime.json").read_bytes())
    assert runtime_a["toolset"]["id"] != runtime_b["toolset"]["id"]
    assert (first.path / "trace.jsonl").read_bytes() == (changed.path / "trace.jsonl").read_bytes()


def _retry_config(tmp_path: Path, attempts: int) -> Path:
    folder = tmp_path / f"cfg{attempts}"
    folder.mkdir(exist_ok=True)
    config = folder / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "evidence_tools"\npath = "{EXAMPLE_DIR.as_posix()}"\n\n'
        f'[tools.stock]\nextensions = [[{{name = "retry", config = {{attempts = {attempts}}}}}]]\n',
        encoding="utf-8",
    )
    return config


def test_changed_wrapper_config_changes_runtime_descriptor_and_run_id(tmp_path: Path) -> None:
    spec = RunSpec.model_validate(
        base_spec(
            steps=[{"id": "apples", "tool": "stock_retry", "arguments": {"item": "apple"}}],
            reasoner={},
        )
    )

    async def once(attempts: int, root: str) -> tuple[str, bool, dict[str, Any], dict[str, Any]]:
        async with load_toolset(_retry_config(tmp_path, attempts)) as toolset:
            outcome = await execute_run(spec, root=tmp_path / root, toolset=toolset)
        manifest = json.loads((outcome.path / "manifest.json").read_bytes())
        runtime = json.loads((outcome.path / "runtime.json").read_bytes())
        return outcome.run_id, outcome.reused, manifest, runtime

    run_2, _, manifest_2, runtime_2 = asyncio.run(once(2, "a"))
    run_3, _, manifest_3, runtime_3 = asyncio.run(once(3, "b"))
    again, reused, _, _ = asyncio.run(once(2, "a"))
    # the id is a function of the recorded files: the same work again is the same run
    assert (again, reused) == (run_2, True)
    assert run_2 == manifest_2["run_id"] and run_3 == manifest_3["run_id"]
    files_2 = {entry["path"]: entry for entry in manifest_2["files"]}
    files_3 = {entry["path"]: entry for entry in manifest_3["files"]}
    assert files_2.keys() == files_3.keys()
    # only runtime.json differs (timings.json is outside the id) ...
    assert {path for path in files_2 if files_2[path] != files_3[path]} == {
        "runtime.json",
        "timings.json",
    }
    assert run_2 != run_3
    # ... and in it only the retry layer's config digest and the ids derived from it
    assert _differences(runtime_2, runtime_3) == {
        ("id",),
        ("toolset", "id"),
        ("toolset", "tools", 1, "fingerprint"),
        ("toolset", "tools", 1, "stack", 0, "config_digest"),
    }
    assert runtime_2["toolset"]["tools"][1]["stack"][0]["name"] == "retry"


def _differences(a: Any, b: Any, at: tuple[str | int, ...] = ()) -> set[tuple[str | int, ...]]:
    """The paths at which two JSON values differ (leaves, or where the shapes part)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = a.keys() | b.keys()
        return {path for k in keys for path in _differences(a.get(k), b.get(k), (*at, k))}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return {path for i, (x, y) in pairs for path in _differences(x, y, (*at, i))}
    return set() if a == b else {at}


def test_tool_failure_is_recorded_and_dependents_skipped(tmp_path: Path) -> None:
    raw = base_spec()
    raw["steps"][0]["arguments"] = {"item": "pear"}
    outcome = run(tmp_path, raw, make_toolset(Counter()))
    events = _events(outcome.path)
    returned = next(e for e in events if e.type == "tool_returned")  # type: ignore[attr-defined]
    assert returned.result.ok is False  # type: ignore[attr-defined]
    assert returned.result.failure.kind == "tool_error"  # type: ignore[attr-defined]
    finished = {e.step: e for e in events if e.type == "step_finished"}  # type: ignore[attr-defined]
    assert finished["apples"].status == "failed"
    assert finished["fruit"].status == "skipped"
    assert finished["fruit"].detail == {"reason": "dependency 'apples' did not finish ok"}
    assert [c.status.value for c in outcome.outcome.claims] == [
        "insufficient_evidence",
        "insufficient_evidence",
    ]
    assert outcome.outcome.claims[0].reason.startswith("step 'apples' has no result: tool_error:")
    assert outcome.report.outcome == "failed"  # strict: warnings fail
    assert not verify_run(outcome.path).ok


def test_audit_policy_reports_tool_failures_without_failing(tmp_path: Path) -> None:
    raw = base_spec(policy="audit")
    raw["steps"][0]["arguments"] = {"item": "pear"}
    outcome = run(tmp_path, raw, make_toolset(Counter()))
    assert outcome.report.outcome == "passed"
    steps = next(r for r in outcome.report.results if r.check == "required-steps")
    assert [f.severity.value for f in steps.findings] == ["warning", "warning"]
    assert verify_run(outcome.path).ok


def test_tool_call_budget_stops_the_run_with_a_recorded_failure(tmp_path: Path) -> None:
    counter = Counter()
    outcome = run(
        tmp_path, base_spec(budgets={"tool_calls": 2}, policy="audit"), make_toolset(counter)
    )
    assert counter.calls == 2
    assert outcome.outcome.stopped
    events = _events(outcome.path)
    failed = next(e for e in events if e.type == "run_failed")  # type: ignore[attr-defined]
    assert failed.message == "tool-call budget of 2 calls spent before step 'fruit'"  # type: ignore[attr-defined]
    assert failed.detail == {"budget": "tool_calls", "limit": 2, "used": 3}  # type: ignore[attr-defined]
    assert events[-1].status == "failed"  # type: ignore[attr-defined]
    assert outcome.report.outcome == "failed"  # audit: budget is an error
    budget = next(r for r in outcome.report.results if r.check == "budget")
    assert budget.status == "failed"
    permissive = verify_run(outcome.path, policy="permissive")  # type: ignore[arg-type]
    assert permissive.report is not None and permissive.report.outcome == "passed"


def test_evidence_budget_stops_before_storing(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(budgets={"evidence_bytes": 100}), make_toolset(Counter()))
    assert outcome.outcome.stopped
    assert outcome.outcome.failures[-1]["reason"] == (
        "evidence budget of 100 bytes exceeded (155 bytes needed)"
    )
    assert len(RunEvidence.open(outcome.path).names()) == 1


def test_wall_clock_budget_cancels_a_slow_call(tmp_path: Path) -> None:
    spec = base_spec(
        steps=[
            {"id": "nap", "tool": "slow", "arguments": {"seconds": 30}},
            {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
        ],
        reasoner={},
        budgets={"wall_seconds": 0.5},
    )
    outcome = run(tmp_path, spec, make_toolset(Counter()))
    events = _events(outcome.path)
    returned = next(e for e in events if e.type == "tool_returned")  # type: ignore[attr-defined]
    assert returned.result.failure.kind == "timeout"  # type: ignore[attr-defined]
    failed = next(e for e in events if e.type == "run_failed")  # type: ignore[attr-defined]
    assert failed.detail["budget"] == "wall_seconds"  # type: ignore[attr-defined]
    assert failed.step == "apples"  # type: ignore[attr-defined]
    timings = json.loads((outcome.path / "timings.json").read_bytes())
    assert timings["wall_seconds"] < 30  # it never waited for the 30 s nap


def test_a_damaged_run_with_the_same_id_is_not_reused(tmp_path: Path) -> None:
    first = run(tmp_path, base_spec(), make_toolset(Counter()))
    claims = first.path / "claims.json"
    claims.write_bytes(claims.read_bytes().replace(b"12", b"13"))
    with pytest.raises(VerificationError) as info:
        run(tmp_path, base_spec(), make_toolset(Counter()))
    assert info.value.message.startswith(
        f"runs/{first.run_id} already exists but fails its manifest check (claims.json: "
    )
    assert info.value.message.endswith("; move it away and run again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
