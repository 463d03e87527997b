"""Paging through a run of many calls over the HTTP API, reading only what a page needs.

The run is a recorded session of 3,000 tool calls (about 9 MB of trace); ``serve-api``
is a real process, and what it reads is its own count of bytes read (``rchar`` in
``/proc/PID/io``), so a page that loaded the trace would show it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import free_port, spawn

import toolproof
from toolproof.bundle.evidence import RunEvidence

TOKEN = "pages-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CALLS = 3000
KIB = 1024

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/io").exists(), reason="counts bytes read through /proc/PID/io"
)


async def fetch(i: int) -> str:
    """Return document ``i``: 1,200 bytes."""
    return (f"document {i}: " + "lorem ipsum dolor sit amet " * 45)[:1200]


async def _record(root: Path) -> str:
    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(fetch))
    toolset.seal()
    async with toolproof.record_session(toolset, root=root, task="many", segment_calls=0) as s:
        for i in range(CALLS):
            await s.call("fetch", {"i": i})
    return s.run_id


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path, int]]:
    root = tmp_path_factory.mktemp("pages")
    run_id = asyncio.run(_record(root))
    port = free_port()
    args = ["serve-api", "--root", str(root), "--port", str(port)]
    with (
        spawn(args, port, env={"TOOLPROOF_API_TOKEN": TOKEN}) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=60) as client,
    ):
        client.get(f"/v1/runs/{run_id}/trace", params={"limit": 1})  # imports done
        yield client, root / "runs" / run_id, server.pid


def _read_by(pid: int) -> int:
    """Bytes the process has read so far (``rchar``: every read(2), pread(2), recv(2))."""
    for line in Path(f"/proc/{pid}/io").read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/PID/io")


def _get(served: tuple[httpx.Client, Path, int], path: str, **params: object) -> httpx.Response:
    client, run, _ = served
    return client.get(f"/v1/runs/{run.name}/{path}", params=params)


def _lines(run: Path) -> list[bytes]:
    return (run / "trace.jsonl").read_bytes().splitlines(keepends=True)


def _cursor(lines: list[bytes], position: int) -> str:
    return f"{position}@{sum(len(line) for line in lines[:position])}"


def test_cursors_walk_the_whole_trace_a_page_at_a_time(
    served: tuple[httpx.Client, Path, int],
) -> None:
    lines = _lines(served[1])
    # per call: step_started, tool_called, tool_returned, evidence_registered,
    # step_finished; then derive, verify and finalize start and finish
    assert len(lines) == 5 * CALLS + 6
    first = _get(served, "trace", limit=300)
    assert first.content == b"".join(lines[:300])
    assert (first.headers["x-next-cursor"], first.headers["x-next-start"]) == (
        _cursor(lines, 300),
        "300",
    )
    got, cursor, pages = [first.content], first.headers["x-next-cursor"], 1
    while cursor:
        page = _get(served, "trace", cursor=cursor, limit=1000)
        got.append(page.content)
        cursor, pages = page.headers.get("x-next-cursor"), pages + 1
    assert (b"".join(got), pages) == (b"".join(lines), 16)  # 300, then 14 x 1000, then 706


def test_a_page_far_into_the_trace_reads_about_its_own_bytes(
    served: tuple[httpx.Client, Path, int],
) -> None:
    lines, pid = _lines(served[1]), served[2]
    size = (served[1] / "trace.jsonl").stat().st_size
    assert size > 9_000_000
    cursor = _cursor(lines, 14_000)
    before = _read_by(pid)
    page = _get(served, "trace", cursor=cursor, limit=300)
    read = _read_by(pid) - before
    assert page.content == b"".join(lines[14_000:14_300])
    assert page.headers["x-next-cursor"] == _cursor(lines, 14_300)
    # the page (about 190 kB), one 256 KiB read block and the request: not the 9 MB trace
    assert len(page.content) < read < len(page.content) + 300 * KIB
    before = _read_by(pid)
    first = _get(served, "trace", limit=300)  # from the first byte: no line to find
    read = _read_by(pid) - before
    assert first.content == b"".join(lines[:300])
    assert len(first.content) < read < len(first.content) + 300 * KIB


def test_start_finds_its_event_once_then_pages_from_what_it_found(
    served: tuple[httpx.Client, Path, int],
) -> None:
    lines, pid = _lines(served[1]), served[2]
    page = _get(served, "trace", start=12_345, limit=5)
    assert page.content == b"".join(lines[12_345:12_350])
    assert page.headers["x-next-cursor"] == _cursor(lines, 12_350)
    before = _read_by(pid)
    again = _get(served, "trace", start=12_000, limit=5)  # in the part already scanned
    read = _read_by(pid) - before
    assert again.content == b"".join(lines[12_000:12_005])
    assert read < 2 * 1024 * KIB + 64 * KIB  # one checkpoint's block and the page's
    assert _get(served, "trace", start=len(lines)).content == b""


def test_bad_cursors_are_refused_naming_the_rule(
    served: tuple[httpx.Client, Path, int],
) -> None:
    lines = _lines(served[1])
    inside = _get(served, "trace", cursor="1@5")
    assert (inside.status_code, inside.json()["message"]) == (
        422,
        "cursor 1@5: byte 5 of trace.jsonl is not the start of a line "
        "(the byte before it is not a newline)",
    )
    size = sum(len(line) for line in lines)
    past = _get(served, "trace", cursor=f"1@{size + 1}")
    assert past.json() == {
        "status": 422,
        "error": "invalid-request",
        "message": f"cursor 1@{size + 1}: byte {size + 1} is past the end of trace.jsonl "
        f"({size} bytes)",
        "fields": {"parameter": "cursor", "rule": "trace cursor"},
    }
    malformed = _get(served, "trace", cursor="next")
    assert malformed.json()["message"] == (
        "cursor 'next' is not a trace cursor: expected POSITION@OFFSET, two whole numbers "
        "(as X-Next-Cursor gives them)"
    )
    both = _get(served, "trace", cursor="0@0", start=0)
    assert (both.status_code, both.json()["message"]) == (422, "give start or cursor, not both")
    too_many = _get(served, "trace", limit=100_001)
    assert too_many.status_code == 422


def test_an_evidence_item_is_read_from_the_pack_alone(
    served: tuple[httpx.Client, Path, int],
) -> None:
    run, pid = served[1], served[2]
    evidence = RunEvidence.open(run)
    name = evidence.names()[-1]
    assert (run / "evidence.pack").stat().st_size > 3_000_000
    before = _read_by(pid)
    answer = _get(served, f"files/evidence/{name}")
    read = _read_by(pid) - before
    assert (answer.status_code, answer.content) == (200, evidence.read(name))
    assert read < 16 * KIB  # its line and its 1,200 bytes, and the request


def test_the_summary_counts_the_calls_once_and_matches_the_listing(
    served: tuple[httpx.Client, Path, int],
) -> None:
    client, run, pid = served
    timings = json.loads((run / "timings.json").read_bytes())
    summary = _get(served, "summary").json()
    assert summary == {
        "run_id": run.name,
        "task": "many",
        "outcome": "passed",
        "started_at": timings["started_at"],
        "claims": 0,
        "tool_calls": CALLS,
    }
    before = _read_by(pid)
    assert _get(served, "summary").json() == summary
    assert _read_by(pid) - before < 1024 * KIB  # the small files again, not the 9 MB trace
    assert client.get("/v1/runs").json()["runs"] == [summary]
