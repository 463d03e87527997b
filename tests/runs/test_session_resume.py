"""Named sessions that resume after a real SIGKILL (issue 34 point 3).

The agent runs in its own process (``resume_agent.py``: look A, charge A-1, pay B-1,
charge A-2, look C) and is SIGKILLed inside a side-effecting body, before or after
its side effect; the same agent code then runs again with ``resume=True``. The
recorded steps are served from the record (no body runs), recording goes on live in
a second segment linked to the recovered one, the ledger of side effects holds no
duplicate key, and the chain verifies. A resume on a full disk (a real tmpfs, filled)
keeps the live session for the next resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli_support import toolproof as cli

import toolproof
from toolproof.bundle.rundir import process_identity
from toolproof.errors import InputError
from toolproof.runs.chain import verify_chain
from toolproof.verify.verifier import verify_run

AGENT = Path(__file__).with_name("resume_agent.py")


def run_agent(
    root: Path, mode: str, kill: str = "", segment_calls: int = 2000
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(AGENT), str(root), mode, *([kill] if kill else [])]
    env = {**os.environ, "RESUME_SEGMENT_CALLS": str(segment_calls)}
    return subprocess.run(args, capture_output=True, text=True, env=env, check=False)


def ledger(root: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (root / "ledger.jsonl").read_text().splitlines()]


def crash_and_resume(root: Path, kill: str) -> dict[str, Any]:
    """Record until ``kill`` SIGKILLs the agent, then resume it; the resumed run's output."""
    killed = run_agent(root, "record", kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [path.name for path in (root / "sessions").iterdir()] == ["nightly-42"]
    resumed = run_agent(root, "resume")
    assert resumed.returncode == 0, resumed.stderr
    output: dict[str, Any] = json.loads(resumed.stdout)
    assert not (root / "sessions" / "nightly-42").exists()  # recovered into segment 1
    return output


def no_duplicate_key(root: Path) -> None:
    keys = [entry["key"] for entry in ledger(root)]
    assert len(keys) == len(set(keys))


def test_a_charge_cut_after_its_side_effect_is_outcome_unknown_and_never_charged_again(
    tmp_path: Path,
) -> None:
    output = crash_and_resume(tmp_path, "charge:A-2:after")
    # look A, charge A-1, pay B-1 served from the record; look C the one live body
    assert (output["served_calls"], output["live_calls"]) == (3, 1)
    [a1, a2] = [entry for entry in ledger(tmp_path) if entry["tool"] == "charge"]
    assert (a1["order"], a2["order"]) == ("A-1", "A-2")
    no_duplicate_key(tmp_path)
    results = output["results"]
    assert [r["ok"] for r in results] == [True, True, True, False, True]
    failure = results[3]["failure"]
    assert failure["kind"] == "outcome_unknown"
    assert failure["message"] == (
        f"call call-00000004 to 'charge' (idempotency key {a2['key']}) of session "
        "'nightly-42' was cut before its result was recorded and may have acted; its tool "
        "is neither read-only nor idempotent, nor does it honour the key, so it is not run "
        "again: find out and record it (toolproof sessions reconcile nightly-42 "
        "call-00000004 --outcome FILE)"
    )
    first, head = (tmp_path / "runs" / run_id for run_id in output["run_ids"])
    segment = json.loads((head / "segment.json").read_bytes())
    assert (segment["session"], segment["index"], segment["previous"]["run_id"]) == (
        "nightly-42",
        2,
        first.name,
    )
    chain = verify_chain(head)
    assert (chain.ok, len(chain.segments)) == (True, 2)
    notes = verify_run(head).notes
    assert [(note.check, a2["key"] in note.finding.message) for note in notes] == [
        ("acted-once", True)
    ]


def test_a_keyed_call_cut_after_its_side_effect_runs_again_with_its_key(tmp_path: Path) -> None:
    output = crash_and_resume(tmp_path, "pay:B-1:after")
    # look A and charge A-1 served; pay B-1 (cut, keyed), charge A-2 and look C live
    assert (output["served_calls"], output["live_calls"]) == (2, 3)
    [paid] = [entry for entry in ledger(tmp_path) if entry["tool"] == "pay"]
    assert output["results"][2]["value"] == paid["key"]  # the same key: paid once
    no_duplicate_key(tmp_path)
    head = tmp_path / "runs" / output["run_ids"][-1]
    assert verify_chain(head).ok is True
    verification = verify_run(head)
    assert (verification.ok, verification.notes) == (True, [])


def test_a_charge_cut_before_its_side_effect_is_outcome_unknown_too(tmp_path: Path) -> None:
    output = crash_and_resume(tmp_path, "charge:A-2:before")
    assert [entry["order"] for entry in ledger(tmp_path)] == ["A-1", "B-1"]  # A-2 never acted
    assert output["results"][3]["failure"]["kind"] == "outcome_unknown"
    assert verify_chain(tmp_path / "runs" / output["run_ids"][-1]).ok is True


def test_a_session_killed_in_its_second_segment_resumes_as_a_third(tmp_path: Path) -> None:
    killed = run_agent(tmp_path, "record", "charge:A-2:after", segment_calls=2)
    assert killed.returncode == -signal.SIGKILL
    live = sorted(path.name for path in (tmp_path / "sessions").iterdir())
    assert live[-1] == "nightly-42.2"  # segment 1 sealed already, or still live beside it
    resumed = run_agent(tmp_path, "resume", segment_calls=2)
    assert resumed.returncode == 0, resumed.stderr
    output = json.loads(resumed.stdout)
    assert (output["served_calls"], output["live_calls"]) == (3, 1)
    assert output["results"][3]["failure"]["kind"] == "outcome_unknown"
    assert list((tmp_path / "sessions").iterdir()) == []
    head = tmp_path / "runs" / output["run_ids"][-1]
    chain = verify_chain(head)
    assert (chain.ok, len(chain.segments), len(output["run_ids"])) == (True, 3, 3)
    assert json.loads((head / "segment.json").read_bytes())["index"] == 3
    no_duplicate_key(tmp_path)


def test_sessions_list_shows_the_cut_call_and_reconcile_records_a_persons_finding(
    tmp_path: Path,
) -> None:
    killed = run_agent(tmp_path, "record", "charge:A-2:after")
    assert killed.returncode == -signal.SIGKILL
    [a2] = [entry for entry in ledger(tmp_path) if entry["order"] == "A-2"]
    listed = cli("sessions", "list", "--root", str(tmp_path), "--json")
    [session] = json.loads(listed.stdout)["sessions"]
    cut = {"key": a2["key"], "step": "call-00000004", "tool": "charge"}
    assert (session["session"], session["running"], session["calls"]) == ("nightly-42", False, 3)
    assert (session["cut"], session["reconciled"]) == ([cut], [])
    found = tmp_path / "found.json"
    found.write_text('{"acted": true, "charge": "ch_1"}')
    args = ("sessions", "reconcile", "nightly-42", "call-00000004", "--outcome", str(found))
    stored = json.loads(cli(*args, "--root", str(tmp_path), "--json").stdout)
    assert {k: stored[k] for k in ("session", "step", "tool", "key", "outcome")} == {
        "session": "nightly-42",
        **cut,
        "outcome": {"acted": True, "charge": "ch_1"},
    }
    again = cli(*args, "--root", str(tmp_path))
    assert again.returncode == 1
    assert "call call-00000004 is reconciled already" in again.stderr
    resumed = run_agent(tmp_path, "resume")
    output = json.loads(resumed.stdout)
    failure = output["results"][3]["failure"]
    assert (failure["kind"], failure["detail"]["reconciled"]) == ("outcome_unknown", stored)
    assert failure["message"].endswith(
        f"not run again: reconciled by {stored['who']} at {stored['at']} (outcome "
        f"{stored['outcome_digest']})"
    )
    head = tmp_path / "runs" / output["run_ids"][-1]
    verification = verify_run(head)
    assert (verification.ok, verification.notes) == (True, [])  # reconciled, not reported
    no_duplicate_key(tmp_path)


def test_reconcile_refuses_a_call_that_is_not_cut(tmp_path: Path) -> None:
    killed = run_agent(tmp_path, "record", "charge:A-2:after")
    assert killed.returncode == -signal.SIGKILL
    found = tmp_path / "found.json"
    found.write_text("{}")
    ran = cli(
        "sessions",
        "reconcile",
        "nightly-42",
        "call-00000002",
        "--outcome",
        str(found),
        "--root",
        str(tmp_path),
    )
    assert ran.returncode == 1
    assert (
        f"session 'nightly-42': no cut call 'call-00000002' in an unfinished session of that "
        f"name under {tmp_path}/sessions (cut calls: call-00000004; rule: only a cut "
        "call, its intent logged and no result recorded, is reconciled)"
    ) in " ".join(ran.stderr.split())


def test_resume_needs_a_name_and_an_unfinished_session(tmp_path: Path) -> None:
    toolset = toolproof.Toolset().seal()

    async def open_(**options: Any) -> None:
        async with toolproof.record_session(toolset, root=tmp_path, task="t", **options):
            pass

    with pytest.raises(InputError) as nameless:
        asyncio.run(open_(resume=True))
    assert nameless.value.message == "resume=True needs the session_id of the session to resume"
    with pytest.raises(InputError) as missing:
        asyncio.run(open_(session_id="nightly-42", resume=True))
    assert missing.value.message == (
        f"session 'nightly-42': no unfinished session of that name under {tmp_path}/sessions "
        "(rule: a resume continues a session a crash left; see toolproof sessions list)"
    )
    with pytest.raises(InputError) as bad:
        asyncio.run(open_(session_id="../x"))
    assert bad.value.message == (
        "session_id '../x': not a session name (rule: a letter or digit, then up to 99 "
        "letters, digits, '_' or '-')"
    )
    (tmp_path / "sessions" / "nightly-42").mkdir(parents=True)
    with pytest.raises(InputError) as unfinished:
        asyncio.run(open_(session_id="nightly-42"))
    assert unfinished.value.message == "session 'nightly-42' is unfinished: resume it (resume=True)"
    recorder = subprocess.Popen(["sleep", "60"])  # a recorder of the session, still running
    try:
        header = {"pid": recorder.pid, "process": process_identity(recorder.pid)}
        (tmp_path / "sessions" / "nightly-42" / "session.json").write_text(json.dumps(header))
        for resume in (False, True):
            with pytest.raises(InputError) as running:
                asyncio.run(open_(session_id="nightly-42", resume=resume))
            assert running.value.message == (
                f"session 'nightly-42' is running (pid {recorder.pid}): stop that process "
                "first (rule: one process records a session at a time)"
            )
    finally:
        recorder.kill()
        recorder.wait()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs the test can fill (``mount``, root only; CI runs as root)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("needs mount(2) for a filesystem that fills up")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_resume_on_a_full_disk_keeps_the_live_session_to_resume_again(small_disk: Path) -> None:
    root = small_disk / "root"
    root.mkdir()
    assert run_agent(root, "record", "charge:A-2:after").returncode == -signal.SIGKILL
    live = root / "sessions" / "nightly-42"
    before = sorted(path.name for path in live.iterdir())
    filler = small_disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:  # fill it until ENOSPC
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    refused = run_agent(root, "resume")
    assert refused.returncode == 1
    last = refused.stderr.strip().splitlines()[-1]
    assert last == (
        "toolproof.errors.RecordingError: session 'nightly-42': cannot resume: cannot write "
        f"{live}/segment.json.new: No space left on device; the live session is kept: make "
        "room and resume again"
    )
    assert sorted(path.name for path in live.iterdir()) == before  # nothing lost or half-written
    assert not (root / "runs").exists()
    filler.unlink()
    output = json.loads(run_agent(root, "resume").stdout)
    assert (output["served_calls"], output["live_calls"]) == (3, 1)
    assert output["results"][3]["failure"]["kind"] == "outcome_unknown"
    no_duplicate_key(root)
    assert verify_chain(root / "runs" / output["run_ids"][-1]).ok is True


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"NaN", "not plain JSON (nan is not a JSON number (NaN and Infinity are refused) at $)"),
        (
            b"[1e400]",
            "not plain JSON (inf is not a JSON number (NaN and Infinity are refused) at $[0])",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to parse (rule: at most 256 levels)"),
    ],
)
def test_reconcile_refuses_an_outcome_with_no_json_form_in_one_line(
    tmp_path: Path, data: bytes, rule: str
) -> None:
    live = tmp_path / "sessions" / "nightly-42"
    live.mkdir(parents=True)
    intent = {"key": "k1", "step": "call-00000001", "tool": "pay"}
    (live / "intents.jsonl").write_text(json.dumps(intent) + "\n")
    outcome = tmp_path / "found.json"
    outcome.write_bytes(data)
    args = ("sessions", "reconcile", "nightly-42", "call-00000001", "--outcome", str(outcome))
    ran = cli(*args, "--root", str(tmp_path))
    assert ran.returncode == 1
    assert ran.stderr == f"error: --outcome {outcome}: {rule}\n"
    assert not (live / "reconciled").exists()


def test_reconcile_names_a_session_that_is_not_unfinished(tmp_path: Path) -> None:
    outcome = tmp_path / "found.json"
    outcome.write_text('{"acted": false}')
    args = ("sessions", "reconcile", "nightly-42", "call-00000001", "--outcome", str(outcome))
    ran = cli(*args, "--root", str(tmp_path))
    assert ran.returncode == 1
    assert " ".join(ran.stderr.split()) == (
        f"error: session 'nightly-42': no unfinished session of that name under "
        f"{tmp_path}/sessions (rule: a call is reconciled before the session resumes; see "
        "toolproof sessions list)"
    )


def test_resuming_a_live_directory_with_no_runtime_names_the_file(tmp_path: Path) -> None:
    toolset = toolproof.Toolset().seal()
    live = tmp_path / "sessions" / "nightly-42"
    live.mkdir(parents=True)  # a crash between mkdir and the runtime's write

    async def resume() -> None:
        async with toolproof.record_session(
            toolset, root=tmp_path, task="t", session_id="nightly-42", resume=True
        ):
            pass

    with pytest.raises(InputError) as refused:
        asyncio.run(resume())
    assert refused.value.message == (
        f"session 'nightly-42': {live}/runtime.json: No such file or directory (rule: a "
        "session resumes from the runtime its recorder wrote first; with none, nothing of "
        "it ran: move the directory aside to start the session anew)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions"]
    assert live.is_dir()


def test_sessions_list_reads_past_lines_no_recorder_wrote(tmp_path: Path) -> None:
    live = tmp_path / "sessions" / "nightly-42"
    live.mkdir(parents=True)
    intent = json.dumps({"key": "k1", "step": "call-00000001", "tool": "pay"})
    (live / "intents.jsonl").write_text("[" * 100_000 + "]" * 100_000 + f"\n{intent}\n")
    (live / "trace.jsonl").write_text('["tool_called"]\n' + '["tool_called"' * 100_000 + "\n")
    (live / "session.json").write_text("{}")
    ran = cli("sessions", "list", "--root", str(tmp_path), "--json")
    assert ran.returncode == 0, ran.stderr
    (found,) = json.loads(ran.stdout)["sessions"]
    assert (found["session"], found["started_at"], found["calls"]) == ("nightly-42", "", 0)
    assert found["cut"] == [{"key": "k1", "step": "call-00000001", "tool": "pay"}]
    (live / "session.json").write_text("{" * 100_000)  # no header: not a session
    ran = cli("sessions", "list", "--root", str(tmp_path), "--json")
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(ran.stdout)
    assert listed["sessions"] == []
    assert listed["not_sessions"] == [
        {"directory": "nightly-42", "reason": "session.json: not JSON"}
    ]


def finished_session(root: Path) -> tuple[str, str]:
    """Record session ``nightly-42`` to its end (one call of a keyed ``pay``); its run, end."""

    @toolproof.tool(idempotency="key")
    def pay(order: str, context: toolproof.Context) -> str:
        """Pay an order once per idempotency key."""
        return str(context.idempotency_key)

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(pay))
    toolset.seal()

    async def record() -> str:
        async with toolproof.record_session(
            toolset, root=root, task="t", session_id="nightly-42"
        ) as session:
            await session.call("pay", {"order": "B-1"})
        return session.run_id

    run_id = asyncio.run(record())
    timings = json.loads((root / "runs" / run_id / "timings.json").read_bytes())
    begun = datetime.fromisoformat(timings["started_at"])
    ended = begun + timedelta(seconds=timings["wall_seconds"])
    return run_id, ended.isoformat(timespec="milliseconds")


def test_a_finished_sessions_id_is_refused_for_a_new_session_and_for_a_resume(
    tmp_path: Path,
) -> None:
    run_id, ended = finished_session(tmp_path)
    toolset = toolproof.Toolset().seal()
    ran: list[str] = []

    async def open_(**options: Any) -> None:
        async with toolproof.record_session(
            toolset, root=tmp_path, task="t", session_id="nightly-42", **options
        ):
            ran.append("body")

    with pytest.raises(InputError) as reused:
        asyncio.run(open_())
    assert reused.value.message == (
        f"session 'nightly-42' finished in run {run_id} (ended {ended}); a new session "
        "under its id is refused: a keyed service would take its calls for the finished "
        "session's and not act (rule: a session id names one session: its keys would "
        "repeat; pick a new id)"
    )
    with pytest.raises(InputError) as resumed:
        asyncio.run(open_(resume=True))
    assert resumed.value.message == (
        f"session 'nightly-42' finished in run {run_id} (ended {ended}): nothing to resume "
        "(rule: a session id names one session: its keys would repeat; pick a new id)"
    )
    assert ran == []  # refused before anything ran
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_id]
    assert list((tmp_path / "sessions").iterdir()) == []


def test_serve_refuses_a_finished_sessions_id_with_and_without_resume(tmp_path: Path) -> None:
    run_id, ended = finished_session(tmp_path)
    config = Path(__file__).resolve().parents[1] / "fixtures" / "serve_resume" / "toolproof.toml"
    args = ("serve", "--config", str(config), "--record", str(tmp_path))
    new = cli(*args, "--session-id", "nightly-42")
    assert new.returncode == 1
    assert " ".join(new.stderr.split()) == (
        f"error: session 'nightly-42' finished in run {run_id} (ended {ended}); a new "
        "session under its id is refused: a keyed service would take its calls for the "
        "finished session's and not act (rule: a session id names one session: its keys "
        "would repeat; pick a new id)"
    )
    resumed = cli(*args, "--session-id", "nightly-42", "--resume")
    assert resumed.returncode == 1
    assert " ".join(resumed.stderr.split()) == (
        f"error: session 'nightly-42' finished in run {run_id} (ended {ended}): nothing to "
        "resume (rule: a session id names one session: its keys would repeat; pick a new id)"
    )
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_id]


@pytest.mark.parametrize(
    ("live", "segment_calls", "segments"),
    [("nightly-42", 2000, 1), ("nightly-42.3", 2, 3)],
)
def test_a_segment_committed_before_a_kill_kept_its_live_directory_is_not_committed_twice(
    tmp_path: Path, live: str, segment_calls: int, segments: int
) -> None:
    killed = run_agent(tmp_path, "record", f"committed:{live}", segment_calls=segment_calls)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [path.name for path in (tmp_path / "sessions").iterdir()] == [live]
    marker = json.loads((tmp_path / "sessions" / live / "commit.json").read_bytes())
    committed = sorted(path.name for path in (tmp_path / "runs").iterdir())
    assert len(committed) == segments and marker["run_id"] in committed
    resumed = run_agent(tmp_path, "resume", segment_calls=segment_calls)
    assert resumed.returncode == 0, resumed.stderr
    output = json.loads(resumed.stdout)
    # every call was recorded before the kill: all served, none live, no new segment
    assert (output["served_calls"], output["live_calls"]) == (5, 0)
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == committed
    assert sorted(output["run_ids"]) == committed and output["run_ids"][-1] == marker["run_id"]
    assert list((tmp_path / "sessions").iterdir()) == []
    chain = verify_chain(tmp_path / "runs" / marker["run_id"])
    assert (chain.ok, len(chain.segments)) == (True, segments)
    assert [entry["order"] for entry in ledger(tmp_path)] == ["A-1", "B-1", "A-2"]
    no_duplicate_key(tmp_path)
