"""``show`` and ``verify --recover`` on ``serve --record`` sessions, through the real CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from pathlib import Path

from cli_support import Ran, toolproof
from mcp import Client
from serve_helpers import SERVE_CONFIG, free_port, spawn


def _cli(*args: str) -> Ran:
    return toolproof(*args)


def _session(root: Path, stop: signal.Signals) -> None:
    """Serve over HTTP with ``--record root``, make three calls, stop the server with ``stop``."""
    port = free_port()
    args = ["serve", "-c", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}", "--record", str(root)]
    with spawn(args, port) as process:

        async def calls() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await client.call_tool("add", {"a": 1, "b": 2})
                await client.call_tool("add", {"a": "x"})
                await client.call_tool("echo", {"text": "héllo"})

        asyncio.run(calls())
        process.send_signal(stop)
        process.wait(30)


def test_show_on_a_recorded_session_lists_its_calls(tmp_path: Path) -> None:
    _session(tmp_path, signal.SIGTERM)
    shown = _cli("show", "run_", "--root", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines.pop(0) == "verified (audit policy)"  # the verdict first
    assert lines[0] == "calls (3)"
    assert lines[1:3] == ['1. add({"a": 1, "b": 2})', "   ok 3"]
    assert lines[3] == '2. add({"a": "x"})'
    assert lines[4].startswith("   failed invalid_arguments: ")
    assert lines[5:] == ['3. echo({"text": "héllo"})', '   ok "héllo"']
    # issue 31 point 3: past --limit, calls are counted, not kept
    limited = _cli("show", "run_", "--root", str(tmp_path), "--limit", "2")
    assert limited.returncode == 0, limited.stderr
    assert limited.stdout.splitlines()[1:] == [
        *lines[:5],
        "… 1 more tool call not shown (--limit; --limit 0 shows all)",
    ]
    document = json.loads(
        _cli("show", "run_", "--root", str(tmp_path), "--json", "--limit", "1").stdout
    )
    assert [call["tool"] for call in document["calls"]] == ["add"]
    assert document["calls_total"] == 3
    everything = json.loads(_cli("show", "run_", "--root", str(tmp_path), "--json").stdout)
    assert len(everything["calls"]) == 3
    assert "calls_total" not in everything


def test_recover_ending_in_a_verification_error_exits_2_with_one_line(tmp_path: Path) -> None:
    _session(tmp_path, signal.SIGKILL)
    (live,) = sorted((tmp_path / "sessions").iterdir())
    spare = tmp_path / "spare"
    shutil.copytree(live, spare)
    first = _cli("verify", f"sessions/{live.name}", "--root", str(tmp_path), "--recover")
    assert first.returncode == 0, first.stderr
    (run,) = sorted((tmp_path / "runs").iterdir())
    evidence = run / "evidence.pack"
    evidence.write_bytes(evidence.read_bytes() + b"!")  # the run the same session recovers into
    shutil.move(spare, live)
    again = _cli("verify", f"sessions/{live.name}", "--root", str(tmp_path), "--recover")
    assert again.returncode == 2
    assert "Traceback" not in again.stderr
    assert again.stderr.startswith("error: ")
    assert len(again.stderr.splitlines()) == 1
    assert run.name in again.stderr
