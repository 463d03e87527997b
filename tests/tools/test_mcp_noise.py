"""An ``[[mcp]]`` server that writes junk to stdout, or dies: bounded reports, exit statuses.

The server is the raw JSON-RPC fixture (``tests/fixtures/mcp_fixture_server.py``) with
``--junk-lines N`` (junk before JSON-RPC), ``--junk-per-call N`` and ``--die-by-signal``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_support import fixture_entry

from toolproof import load_toolset

SCRIPT = Path(sys.executable).parent / "toolproof"
SUMMARY = (
    r"MCP server 'junk' wrote (\d+) more lines to stdout that are not JSON-RPC "
    r"\(ignored; (\d+) in all\)"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_twenty_thousand_junk_lines_log_two_lines_not_a_traceback_each(tmp_path: Path) -> None:
    config = write(tmp_path, fixture_entry("junk", "--junk-lines", "20000"))
    started = time.monotonic()
    done = subprocess.run(
        [str(SCRIPT), "tools", "list", "--json", "--config", str(config)],
        capture_output=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert b'"junk_echo"' in done.stdout
    lines = [line for line in done.stderr.decode().splitlines() if "fixture:" not in line]
    assert lines[0] == (
        "MCP server 'junk' wrote a line to stdout that is not JSON-RPC (ignored; further ones "
        "are counted and summarised every 5 s): 'junk line 0: this is not JSON-RPC'"
    )
    summaries = [re.fullmatch(SUMMARY, line) for line in lines[1:]]
    assert all(summaries), lines
    counts = [(int(m[1]), int(m[2])) for m in summaries if m]
    assert sum(more for more, _ in counts) == 19999
    assert counts[-1][1] == 20000
    assert len(counts) <= elapsed / 5 + 2  # at most one summary per 5 s, and a last one
    assert len(done.stderr) < 4000  # was about 1.2 kB per junk line: 24 MB


def test_junk_during_calls_is_counted_and_summarised_once_per_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> list[str]:
        path = write(tmp_path, fixture_entry("junk", "--junk-per-call", "500"))
        async with load_toolset(path) as toolset:
            results = [await toolset["junk_echo"].call({"n": n}) for n in range(3)]
            assert [r.value for r in results] == ['{"n": 0}', '{"n": 1}', '{"n": 2}']
        return [r.getMessage() for r in caplog.records]

    with caplog.at_level(logging.DEBUG):
        messages = asyncio.run(main())
    assert [m for m in messages if "JSON" in m or "Traceback" in m] == [
        "MCP server 'junk' wrote a line to stdout that is not JSON-RPC (ignored; further ones "
        "are counted and summarised every 5 s): 'junk line 0: this is not JSON-RPC'",
        "MCP server 'junk' wrote 1499 more lines to stdout that are not JSON-RPC (ignored; "
        "1500 in all)",
    ]


@pytest.mark.parametrize(
    ("flags", "ended"),
    [((), "exited with status 7"), (("--die-by-signal",), "was killed by signal 9 (SIGKILL)")],
)
def test_a_dead_server_is_reported_with_its_exit_status_or_signal(
    tmp_path: Path, flags: tuple[str, ...], ended: str
) -> None:
    async def main() -> None:
        async with load_toolset(write(tmp_path, fixture_entry("fixture", *flags))) as toolset:
            failure = (await toolset["fixture_die"].call({})).failure
            assert failure is not None
            assert failure.message == (
                f"MCP server 'fixture' closed the connection during tools/call: Connection closed; "
                f"the server process {ended}"
            )
            again = (await toolset["fixture_echo"].call({})).failure
            assert again is not None
            assert again.message.endswith(f"; the server process {ended}")

    asyncio.run(main())


def test_a_server_that_exits_at_start_is_quarantined_with_its_status(tmp_path: Path) -> None:
    async def main() -> str:
        path = write(tmp_path, fixture_entry("exits", "--exit-at-start"))
        async with load_toolset(path) as toolset:
            [item] = toolset.quarantined
            return item.rule

    rule = asyncio.run(main())
    assert rule.startswith(
        "MCP server 'exits': the server closed the connection before answering initialize and "
        "tools/list (the server process exited with status 3); stderr tail: "
    )
