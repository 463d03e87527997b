"""``serve --resume`` prints what recovering the killed session dropped (issue 35 point 1).

A real ``toolproof serve`` SIGKILLs itself inside a call; its live trace is then torn
(40 bytes cut, as a power loss leaves it). The restart with ``--resume`` prints each
line recovery dropped on stderr, as ``toolproof verify --recover`` does, naming the
live directory and the run it became; the run's ``recovery.json`` keeps the same list.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_serve_resume import CALLS, crash, resume


@pytest.mark.timeout(240)
def test_serve_resume_prints_each_line_recovery_dropped(tmp_path: Path) -> None:
    crash(tmp_path, "charge:A-2:after")
    live = tmp_path / "sessions" / "nightly-42"
    trace = live / "trace.jsonl"
    trace.write_bytes(trace.read_bytes()[:-40])
    _, err = resume(tmp_path, CALLS[:1])
    [run] = [path for path in (tmp_path / "runs").iterdir() if (path / "recovery.json").is_file()]
    dropped = json.loads((run / "recovery.json").read_text())["dropped"]
    assert dropped[0].startswith("trace line ")
    lines = [line for line in err.splitlines() if line.startswith("dropped: ")]
    assert lines == [f"dropped: {live} (recovered into {run}): {item}" for item in dropped]
