"""What ``toolproof sessions list`` and ``verify`` say about a sessions root (issue 34 point 3).

One real crash: ``resume_agent.py`` with two steps a segment, SIGKILLed once segment 3's
run is committed and before its live directory is removed. It leaves
``sessions/nightly-42.3`` with ``commit.json`` naming that run, its ``segment.json``
linking to segment 2 under ``runs/``. The commands run in this process (Typer's
``CliRunner``), their output compared line for line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolproof.adapters.cli.app import app, out_console
from toolproof.runs.header import HEADER_RULE

AGENT = Path(__file__).with_name("resume_agent.py")
LIVE = "nightly-42.3"


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The artifact root the crash left (copy it before changing it)."""
    root = tmp_path_factory.mktemp("crashed")
    env = {**os.environ, "RESUME_SEGMENT_CALLS": "2"}
    args = [sys.executable, str(AGENT), str(root), "record", f"committed:{LIVE}"]
    killed = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [path.name for path in (root / "sessions").iterdir()] == [LIVE]
    return root


@pytest.fixture
def root(crashed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(out_console, "width", 250)
    copy = tmp_path / "root"
    shutil.copytree(crashed, copy)
    return copy


def _committed(root: Path) -> str:
    run_id: str = json.loads((root / "sessions" / LIVE / "commit.json").read_bytes())["run_id"]
    assert (root / "runs" / run_id / "manifest.json").is_file()
    return run_id


def _rows(output: str) -> list[list[str]]:
    """The body rows of a rich table, each cell stripped."""
    return [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in output.splitlines()
        if line.startswith("│")
    ]


def test_sessions_list_shows_a_session_committed_before_the_kill_as_committed(
    root: Path,
) -> None:
    run_id = _committed(root)
    listed = CliRunner().invoke(app, ["sessions", "list", "--root", str(root), "--json"])
    assert listed.exit_code == 0, listed.output
    [session] = json.loads(listed.stdout)["sessions"]
    assert (session["state"], session["committed"], session["running"]) == (
        "committed",
        run_id,
        False,
    )
    table = CliRunner().invoke(app, ["sessions", "list", "--root", str(root)])
    [row] = _rows(table.stdout)
    assert row[:3] == ["nightly-42", LIVE, f"committed {run_id[:16]}…"]
    assert row[4:] == ["1", "-"]  # was: "stopped", as a session to resume


def test_sessions_list_shows_a_stray_directory_as_not_a_session(root: Path) -> None:
    (root / "sessions" / "backup").mkdir()
    (root / "sessions" / "backup" / "notes.txt").write_text("mine")
    listed = CliRunner().invoke(app, ["sessions", "list", "--root", str(root), "--json"])
    document = json.loads(listed.stdout)
    assert [session["directory"] for session in document["sessions"]] == [LIVE]
    assert document["not_sessions"] == [{"directory": "backup", "reason": "no session.json"}]
    table = CliRunner().invoke(app, ["sessions", "list", "--root", str(root)])
    rows = _rows(table.stdout)
    assert [row[:3] for row in rows] == [
        ["-", "backup", "not a session: no session.json"],
        ["nightly-42", LIVE, f"committed {_committed(root)[:16]}…"],
    ]


def test_verify_of_a_live_segment_checks_its_link_to_the_sealed_run_under_runs(
    root: Path,
) -> None:
    live = root / "sessions" / LIVE
    previous = json.loads((live / "segment.json").read_bytes())["previous"]["run_id"]
    verified = CliRunner().invoke(app, ["verify", str(live), "--root", str(root)])
    assert verified.exit_code == 2  # a live directory has no manifest: not a run yet
    link = f"segment-link: segment 3 of session nightly-42: linked to {previous[:16]}… "
    assert link + "(files digest checked)" in verified.stdout.splitlines()
    assert "not under this root" not in verified.output  # was looked up in sessions/


@pytest.mark.parametrize(
    ("header", "reason"),
    [(b'{"pid": 12, "started', "not JSON"), (b"[1, 2]", "a JSON array, not an object")],
)
def test_a_damaged_session_json_is_named_with_the_rule(
    root: Path, header: bytes, reason: str
) -> None:
    path = root / "sessions" / LIVE / "session.json"
    path.write_bytes(header)
    recovered = CliRunner().invoke(app, ["verify", str(path.parent), "--recover"])
    assert recovered.exit_code == 1
    assert recovered.stderr.splitlines() == [f"error: {path}: {reason} (rule: {HEADER_RULE})"]


def test_show_of_a_live_session_directory_says_what_to_run(root: Path) -> None:
    live = root / "sessions" / LIVE
    shown = CliRunner().invoke(app, ["show", str(live)])
    assert shown.exit_code == 1
    assert shown.stderr.splitlines() == [  # was: claims.json ... (FileNotFoundError), exit 2
        f"error: {live} is a live session directory, not a run (it holds session.json and "
        f"no manifest.json); recover it into a run: toolproof verify {live} --recover"
    ]


def test_show_of_a_run_with_corrupt_claims_prints_the_verdict_then_the_reason(
    root: Path,
) -> None:
    run = root / "runs" / _committed(root)
    (run / "claims.json").write_bytes(b'{"x":\n')
    shown = CliRunner().invoke(app, ["show", str(run)])
    assert shown.exit_code == 2
    assert shown.stdout.splitlines() == [
        "verification FAILED (1 failure): what follows is what the files say, not trusted; "
        "run `toolproof verify` on this run",
        "  [manifest] claims.json: claims.json has size 6 bytes, the manifest says 2 "
        "(truncated, appended or replaced; refused by size, not read)",
    ]
    assert shown.stderr.splitlines() == [  # was: claims.json ... (ValidationError)
        f"error: {run / 'claims.json'}: Invalid JSON: EOF while parsing a value at line 2 "
        "column 0 (rule: claims.json is the JSON list of the run's claims); "
        "run `toolproof verify` on this run"
    ]


def test_verify_chain_of_a_live_segment_names_its_directory_not_none(root: Path) -> None:
    live = root / "sessions" / LIVE
    ran = CliRunner().invoke(app, ["verify", str(live), "--root", str(root), "--chain"])
    assert ran.exit_code == 2
    assert ran.stderr.splitlines()[0] == f"segment 3: {LIVE} does not verify"  # was: None


def test_sessions_list_shows_a_directory_whose_session_json_is_not_json_as_not_a_session(
    root: Path,
) -> None:
    (root / "sessions" / LIVE / "session.json").write_bytes(b'{"pid": 12, "started')
    listed = CliRunner().invoke(app, ["sessions", "list", "--root", str(root), "--json"])
    document = json.loads(listed.stdout)
    assert document["sessions"] == []  # was: a stopped session, started "" and pid null
    reason = "session.json: not JSON"
    assert document["not_sessions"] == [{"directory": LIVE, "reason": reason}]
    table = CliRunner().invoke(app, ["sessions", "list", "--root", str(root)])
    assert _rows(table.stdout) == [["-", LIVE, f"not a session: {reason}", "-", "-", "-"]]
