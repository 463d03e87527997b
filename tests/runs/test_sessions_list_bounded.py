"""``toolproof sessions list`` reads a live trace in bounded memory (issue 31 point 6).

A session SIGKILLed inside a charge (``resume_agent.py``) leaves a live directory whose
trace holds 3 returned calls; its trace is then grown to 600 MB by a sparse tail with
no newline (``os.truncate``: what a torn disk or a stray writer can leave). The listing
counts the 3 calls and names the cut charge holding at most one block and what it has
read of one line, never more than ``MAX_LINE_BYTES`` (the limit every trace reader
keeps; the tail is longer, so it is dropped at the limit and skipped to its end).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

from cli_support import toolproof as cli

from toolproof.bundle.trace import MAX_LINE_BYTES
from toolproof.runs.unfinished import cut_calls, unfinished_sessions

AGENT = Path(__file__).with_name("resume_agent.py")
TAIL_BYTES = 600 * 1024 * 1024


def test_sessions_list_counts_the_calls_of_a_sparse_600_mb_trace_in_bounded_memory(
    tmp_path: Path,
) -> None:
    killed = subprocess.run(
        [sys.executable, str(AGENT), str(tmp_path), "record", "charge:A-2:after"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    live = tmp_path / "sessions" / "nightly-42"
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    [a2] = [entry for entry in ledger if entry["order"] == "A-2"]
    trace = live / "trace.jsonl"
    os.truncate(trace, trace.stat().st_size + TAIL_BYTES)
    assert TAIL_BYTES > MAX_LINE_BYTES
    tracemalloc.start()
    try:
        [session] = unfinished_sessions(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    cut = {"key": a2["key"], "step": "call-00000004", "tool": "charge"}
    assert (session["session"], session["running"], session["calls"]) == ("nightly-42", False, 3)
    assert session["cut"] == [cut]
    assert cut_calls(live) == [cut]
    assert peak < MAX_LINE_BYTES + 16 * 1024 * 1024, peak  # a whole read: 1.2 GB


def test_sessions_list_refuses_a_root_that_is_not_a_directory(tmp_path: Path) -> None:
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for root, what in ((tmp_path / "nosuch", "no directory"), (afile, "a file, not a directory")):
        ran = cli("sessions", "list", "--root", str(root))
        assert ran.returncode == 1
        assert " ".join(ran.stderr.split()) == (
            f"error: --root {root}: {what} (rule: the root is the artifact directory that "
            "holds sessions/ and runs/)"
        )
    empty = cli("sessions", "list", "--root", str(tmp_path), "--json")
    assert (empty.returncode, json.loads(empty.stdout)["sessions"]) == (0, [])


def test_docs_quote_both_refusals_of_a_root_as_printed(tmp_path: Path) -> None:
    docs = " ".join((Path(__file__).parents[2] / "docs" / "durability.md").read_text().split())
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    for root, shown in ((tmp_path / "nosuch", "PATH"), (afile, "afile.txt")):
        ran = cli("sessions", "list", "--root", str(root))
        printed = " ".join(ran.stderr.split()).removeprefix("error: ")
        assert f"`{printed.replace(str(root), shown)}`" in docs  # was: only the missing root
