"""``toolproof serve --record --session-id NAME --resume`` after a real SIGKILL (issue 34).

A real ``toolproof serve`` process (streamable HTTP) records the named session
``nightly-42`` while the official ``mcp`` client calls look A, charge A-1, pay B-1 and
charge A-2 (``tests/fixtures/serve_resume``); the server SIGKILLs itself inside a
side-effecting body, before or after its side effect. It is restarted with
``--resume`` and a new client makes the same calls, then look C: the recorded calls
are answered from the record (no body runs), a cut ``charge`` is ``outcome_unknown``,
a cut ``pay`` (keyed) runs again with its key, the ledger of side effects holds no
duplicate key, and the session's chain verifies with ``acted-once``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from serve_helpers import TOOLPROOF, free_port, spawn

from toolproof.runs.chain import verify_chain
from toolproof.verify.verifier import verify_run

CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "serve_resume" / "toolproof.toml"
CALLS = [("look", "A"), ("charge", "A-1"), ("pay", "B-1"), ("charge", "A-2")]
SESSION = ["--session-id", "nightly-42"]


def serve_args(root: Path, port: int, *more: str) -> list[str]:
    record = ["--record", str(root), *SESSION, *more]
    return ["serve", "--config", str(CONFIG), *record, "--http", f"127.0.0.1:{port}"]


def env(root: Path, kill: str = "") -> dict[str, str]:
    return {"RESUME_LEDGER": str(root / "ledger.jsonl"), "RESUME_KILL": kill}


def ledger(root: Path) -> list[dict[str, str]]:
    lines = (root / "ledger.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


async def call_all(port: int, calls: list[tuple[str, str]]) -> list[tuple[bool, str]]:
    """Each call's (is_error, text), in order; stops where the server dies."""
    answers: list[tuple[bool, str]] = []
    with contextlib.suppress(Exception):  # the server is SIGKILLed inside a call
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            for tool, order in calls:
                answer = await client.call_tool(tool, {"order": order})
                answers.append((bool(answer.is_error), answer.content[0].text))  # type: ignore[union-attr]
    return answers


def crash(root: Path, kill: str) -> None:
    """Record the session until the server SIGKILLs itself inside ``kill``'s body."""
    port = free_port()
    with spawn(serve_args(root, port), port, env=env(root, kill)) as server:
        answers = asyncio.run(call_all(port, CALLS))
        assert server.wait(30) == -signal.SIGKILL
    assert len(answers) == 3  # the fourth call's server died inside it
    assert [path.name for path in (root / "sessions").iterdir()] == ["nightly-42"]


def resume(root: Path, calls: list[tuple[str, str]]) -> tuple[list[tuple[bool, str]], str]:
    """Restart the server with --resume, make ``calls``, stop it (SIGTERM); answers, stderr."""
    port = free_port()
    with spawn(serve_args(root, port, "--resume"), port, env=env(root)) as server:
        answers = asyncio.run(call_all(port, calls))
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err.decode()
    return answers, err.decode()


def head_of(stderr: str) -> str:
    return stderr.split("(verify all: toolproof verify ")[1].split()[0]


def no_duplicate_key(root: Path) -> None:
    keys = [entry["key"] for entry in ledger(root)]
    assert len(keys) == len(set(keys))


def live_calls(run: Path) -> list[dict[str, Any]]:
    """The ``tool_called`` events of a run's trace (the calls it recorded)."""
    lines = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [event for event in map(json.loads, lines) if event["type"] == "tool_called"]


@pytest.mark.timeout(240)
def test_a_charge_cut_after_its_side_effect_is_answered_outcome_unknown_after_a_restart(
    tmp_path: Path,
) -> None:
    crash(tmp_path, "charge:A-2:after")
    answers, err = resume(tmp_path, [*CALLS, ("look", "C")])
    [_, a2] = [entry for entry in ledger(tmp_path) if entry["tool"] == "charge"]
    [paid] = [entry for entry in ledger(tmp_path) if entry["tool"] == "pay"]
    assert answers[:3] == [(False, "order A"), (False, "charged A-1"), (False, paid["key"])]
    assert answers[3] == (
        True,
        f"outcome_unknown: call call-00000004 to 'charge' (idempotency key {a2['key']}) of "
        "session 'nightly-42' was cut before its result was recorded and may have acted; "
        "its tool is neither read-only nor idempotent, nor does it honour the key, so it "
        "is not run again: find out and record it (toolproof sessions reconcile "
        "nightly-42 call-00000004 --outcome FILE)",
    )
    assert answers[4] == (False, "order C")
    assert [entry["order"] for entry in ledger(tmp_path)] == ["A-1", "B-1", "A-2"]  # once each
    no_duplicate_key(tmp_path)
    assert "toolproof: resuming session nightly-42: 1 segment recorded; their calls are " in err
    assert "recorded 2 live calls in 1 new segment after 1 segment" in err
    head = tmp_path / "runs" / head_of(err)
    # the new segment holds only the live steps: the outcome_unknown and look C
    called = live_calls(head)
    assert [(e["call"]["tool"], e["step"]) for e in called] == [
        ("charge", "call-00000004"),  # numbered after the record's last step, as it was
        ("look", "call-00000005"),
    ]
    assert called[0]["idempotency_key"] == a2["key"]  # the cut call's key, not a new one
    chain = verify_chain(head)
    assert (chain.ok, len(chain.segments)) == (True, 2)
    notes = verify_run(head).notes
    assert [(note.check, a2["key"] in note.finding.message) for note in notes] == [
        ("acted-once", True)
    ]
    assert list((tmp_path / "sessions").iterdir()) == []


@pytest.mark.timeout(240)
def test_a_charge_cut_before_its_side_effect_is_outcome_unknown_and_never_charged(
    tmp_path: Path,
) -> None:
    crash(tmp_path, "charge:A-2:before")
    answers, err = resume(tmp_path, CALLS)
    assert [entry["order"] for entry in ledger(tmp_path)] == ["A-1", "B-1"]  # A-2 never acted
    assert answers[3][0] is True and answers[3][1].startswith("outcome_unknown: call call-00000004")
    head = tmp_path / "runs" / head_of(err)
    assert verify_chain(head).ok is True
    assert [note.check for note in verify_run(head).notes] == ["acted-once"]


@pytest.mark.timeout(240)
def test_a_keyed_pay_cut_after_paying_runs_again_with_its_key_and_pays_once(
    tmp_path: Path,
) -> None:
    crash_calls = CALLS[:3]  # the server dies inside pay B-1, after paying
    port = free_port()
    with spawn(serve_args(tmp_path, port), port, env=env(tmp_path, "pay:B-1:after")) as server:
        assert len(asyncio.run(call_all(port, crash_calls))) == 2
        assert server.wait(30) == -signal.SIGKILL
    # a client that diverges from the record is answered `unrecorded`, nothing runs
    diverged = [("look", "Z"), *CALLS]
    answers, err = resume(tmp_path, diverged)
    assert answers[0][0] is True
    assert answers[0][1].startswith("unrecorded: frozen replay refused at event ")
    assert "the agent made an unrecorded call to 'look' (occurrence 1)" in answers[0][1]
    [paid] = [entry for entry in ledger(tmp_path) if entry["tool"] == "pay"]
    assert answers[1:] == [
        (False, "order A"),
        (False, "charged A-1"),
        (False, paid["key"]),  # run again with the same key: the ledger paid once
        (False, "charged A-2"),
    ]
    no_duplicate_key(tmp_path)
    head = tmp_path / "runs" / head_of(err)
    assert [e["call"]["tool"] for e in live_calls(head)] == ["pay", "charge"]
    assert verify_chain(head).ok is True
    verification = verify_run(head)
    assert (verification.ok, verification.notes) == (True, [])


def test_a_named_session_left_unfinished_is_refused_without_resume(tmp_path: Path) -> None:
    crash(tmp_path, "charge:A-2:after")
    again = subprocess.run(
        [*TOOLPROOF, *serve_args(tmp_path, free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert again.returncode == 1
    assert "session 'nightly-42' is unfinished: resume it (--resume)" in again.stderr
    nameless = subprocess.run(
        [*TOOLPROOF, "serve", "--config", str(CONFIG), "--record", str(tmp_path), "--resume"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert nameless.returncode == 1
    assert "--resume needs --session-id NAME (the session to resume)" in nameless.stderr
