"""A non-deterministic provider: replay serves its record; two live runs differ as variation."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

from runs_support import Counter, make_toolset, run

import toolproof
from toolproof import Tool, Toolset
from toolproof.runs.diff import diff_runs
from toolproof.testing import assert_frozen_replay

_ticks = itertools.count(1000)


@toolproof.tool(deterministic=False, varies=("clock",))
async def clock() -> int:
    """The current time, in ticks."""
    return next(_ticks)


def _toolset() -> Toolset:
    base = make_toolset(Counter())
    toolset = Toolset()
    toolset.add(base["stock"])
    toolset.add(Tool.from_function(clock))
    return toolset.seal()


SPEC = {
    "task": "When was the stock counted?",
    "steps": [
        {"id": "apples", "tool": "stock", "arguments": {"item": "apple"}},
        {"id": "now", "tool": "clock"},
    ],
    "reasoner": {
        "name": "tool-results",
        "params": {"claims": [{"statement": "Counted at {t}.", "cite": {"t": "steps.now.value"}}]},
    },
}


def test_two_live_runs_differ_only_where_the_clock_varies(tmp_path: Path) -> None:
    first = run(tmp_path, SPEC, _toolset())
    second = run(tmp_path, SPEC, _toolset())
    assert first.run_id != second.run_id  # a live re-run is a new run
    for outcome in (first, second):
        assert_frozen_replay(outcome.path)  # each replays its own recorded clock
    diff = diff_runs(first.path, second.path)
    assert diff.varying == {"tool clock": ["clock"]}
    assert diff.explained
    assert diff.first_event is not None and diff.first_event["source"] == "tool clock"
    assert diff.files["runtime.json"] == "same"
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolproof.adapters.cli import main; main()",
            "diff",
            first.run_id,
            second.run_id,
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "declared non-deterministic sources: tool clock (varies: clock)" in shown.stdout
    assert "not corruption" in shown.stdout


def test_a_changed_spec_is_not_explained_by_variation(tmp_path: Path) -> None:
    first = run(tmp_path, SPEC, _toolset())
    other = {**SPEC, "task": "Another task."}
    diff = diff_runs(first.path, run(tmp_path, other, _toolset()).path)
    assert diff.varying == {"tool clock": ["clock"]}
    assert not diff.explained
