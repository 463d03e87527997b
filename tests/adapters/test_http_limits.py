"""Limits of the HTTP servers on real uvicorn processes (issue 12 item 8).

Trace paging past an event larger than the page limit, a toolset module that exits or
blocks at import, slow-header clients, oversized request heads, and a ``runs`` folder
symlinked outside the artifact root.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import SERVE_CONFIG, free_port, spawn

from toolproof.adapters.http.asgi import HEADER_TIMEOUT

TOKEN = "limits-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RESPONSE_LIMIT = 4096

TOOLS = '''
import toolproof


@toolproof.tool
def echo(text: str) -> str:
    """Answer the text."""
    return text
'''


def spec(toolset: str, text: str) -> dict[str, Any]:
    return {
        "spec": {
            "task": "echo",
            "toolset": toolset,
            "policy": "audit",
            "steps": [{"id": "e", "tool": "echo", "arguments": {"text": text}}],
        }
    }


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("limits")
    (root / "tp_limits_echo.py").write_text(TOOLS, encoding="utf-8")
    (root / "echo.toml").write_text('[[python]]\nmodule = "tp_limits_echo"\n', "utf-8")
    (root / "tp_limits_exits.py").write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    (root / "exits.toml").write_text('[[python]]\nmodule = "tp_limits_exits"\n', "utf-8")
    (root / "tp_limits_blocks.py").write_text("import time\ntime.sleep(3600)\n", "utf-8")
    (root / "blocks.toml").write_text(
        '[[python]]\nmodule = "tp_limits_blocks"\nimport_timeout = 2\n', "utf-8"
    )
    port = free_port()
    args = [
        *("serve-api", "--root", str(root), "--port", str(port)),
        *("--max-response-bytes", str(RESPONSE_LIMIT)),
    ]
    with spawn(args, port, env={"TOOLPROOF_API_TOKEN": TOKEN}):
        yield f"http://127.0.0.1:{port}", root


def test_trace_paging_stops_at_an_event_larger_than_the_page_limit(
    api: tuple[str, Path],
) -> None:
    created = httpx.post(
        f"{api[0]}/v1/runs", json=spec("echo.toml", "x" * 6000), headers=AUTH, timeout=60
    )
    assert created.status_code == 201, created.text
    trace = f"{api[0]}/v1/runs/{created.json()['run_id']}/trace"
    start, pages = 0, 0
    while True:  # bounded: every page either moves on or is refused
        pages += 1
        assert pages < 20, "X-Next-Start did not move"
        answer = httpx.get(trace, params={"start": start}, headers=AUTH)
        if answer.status_code != 200 or "x-next-start" not in answer.headers:
            break
        assert int(answer.headers["x-next-start"]) > start
        start = int(answer.headers["x-next-start"])
    assert answer.status_code == 422
    body = answer.json()
    size = body["fields"]["size"]
    assert size > RESPONSE_LIMIT
    lines = (api[1] / "runs" / created.json()["run_id"] / "trace.jsonl").read_bytes()
    after_it = sum(len(line) for line in lines.splitlines(keepends=True)[: start + 1])
    assert body == {
        "status": 422,
        "error": "response-too-large",
        "message": f"trace event {start} is {size} bytes, over the API's response limit of "
        f"{RESPONSE_LIMIT} bytes; read trace.jsonl from the run directory",
        "fields": {
            "event": start,
            "size": size,
            "limit": RESPONSE_LIMIT,
            "next_cursor": f"{start + 1}@{after_it}",  # where a cursor client goes on
        },
    }
    after = httpx.get(trace, params={"start": start + 1}, headers=AUTH)  # paging goes on
    assert after.status_code == 200 or after.json()["fields"]["event"] == start + 1


def test_a_run_too_big_to_answer_whole_answers_its_summary_and_names_what_it_left_out(
    api: tuple[str, Path],
) -> None:
    created = httpx.post(
        f"{api[0]}/v1/runs", json=spec("echo.toml", "y" * 6000), headers=AUTH, timeout=60
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]
    answer = httpx.get(f"{api[0]}/v1/runs/{run_id}", headers=AUTH)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    directory = api[1] / "runs" / run_id
    budget, omitted, read = RESPONSE_LIMIT, {}, {}
    for name in ("spec", "plan", "report", "claims", "manifest"):  # the documented order
        data = (directory / f"{name}.json").read_bytes()
        if len(data) > budget:
            omitted[name] = len(data)
        else:
            read[name] = json.loads(data)
            budget -= len(data)
    assert "spec" in omitted  # its 6,000-byte argument alone is past the limit
    assert body["omitted"] == omitted
    assert {name: body[name] for name in read} == read
    assert all(body[name] is None for name in omitted)
    started = json.loads((directory / "timings.json").read_bytes())["started_at"]
    assert body["summary"] == {
        "run_id": run_id,
        "task": "echo",
        "outcome": "passed",
        "started_at": started,
        "claims": len(json.loads((directory / "claims.json").read_bytes())),
        "tool_calls": 1,
    }


def test_a_module_that_exits_at_import_is_a_problem_and_the_api_stays_up(
    api: tuple[str, Path],
) -> None:
    answer = httpx.post(f"{api[0]}/v1/runs", json=spec("exits.toml", "hi"), headers=AUTH)
    assert answer.status_code == 422
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["message"] == (  # the server's absolute root is not told
        "<root>/exits.toml: python[0].module: cannot import module 'tp_limits_exits': "
        "SystemExit(3): the module called sys.exit() while being imported"
    )
    assert str(api[1]) not in answer.text
    assert httpx.get(f"{api[0]}/v1/health").status_code == 200


def test_a_module_that_blocks_at_import_times_out_and_health_keeps_answering(
    api: tuple[str, Path],
) -> None:
    answers: list[httpx.Response] = []

    def create() -> None:
        answers.append(
            httpx.post(
                f"{api[0]}/v1/runs", json=spec("blocks.toml", "hi"), headers=AUTH, timeout=60
            )
        )

    started = time.monotonic()
    worker = threading.Thread(target=create)
    worker.start()
    time.sleep(0.5)
    health = [httpx.get(f"{api[0]}/v1/health", timeout=5).status_code for _ in range(3)]
    worker.join(60)
    elapsed = time.monotonic() - started
    assert health == [200, 200, 200]
    [answer] = answers
    assert answer.status_code == 422
    assert answer.json()["message"] == (
        "<root>/blocks.toml: python[0].module: importing module 'tp_limits_blocks' did "
        "not finish within 2 s (import_timeout); it blocks at import"
    )
    assert elapsed < 30
    assert httpx.get(f"{api[0]}/v1/health").status_code == 200


def _slow_client(port: int, stop_after: float) -> tuple[float, bytes]:
    """Send a request head a byte every 0.25 s; return when the server hung up, and what it said."""
    started = time.monotonic()
    head = f"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=stop_after) as sock:
        sock.sendall(head)
        sock.settimeout(0.25)
        while time.monotonic() - started < stop_after:
            try:
                sock.sendall(b"X")
                data = sock.recv(4096)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started, b""
            return time.monotonic() - started, data  # b"" when closed
    raise AssertionError(f"a slow-header client was still connected after {stop_after} s")


@pytest.mark.parametrize("server", ["serve-api", "serve --http"])
def test_a_slow_header_client_is_cut_off_within_the_header_timeout(
    tmp_path: Path, server: str
) -> None:
    port = free_port()
    if server == "serve-api":
        args = ["serve-api", "--root", str(tmp_path), "--port", str(port), "--no-auth"]
    else:
        args = ["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"]
    with spawn(args, port, env={"TOOLPROOF_MCP_TOKEN": ""}):
        results: list[tuple[float, bytes]] = []
        clients = [
            threading.Thread(target=lambda: results.append(_slow_client(port, 40)))
            for _ in range(20)
        ]
        for client in clients:
            client.start()
        time.sleep(1)
        path = "/v1/health" if server == "serve-api" else "/mcp"
        meanwhile = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10).status_code
        for client in clients:
            client.join(60)
    assert meanwhile in (200, 400, 405, 406)  # answered while 20 clients dribble headers
    assert len(results) == 20
    for elapsed, said in results:
        # one-sided: not cut off early; cut off at all is _slow_client's 40 s bound
        assert elapsed >= HEADER_TIMEOUT - 1, elapsed
        assert said == b""


def test_a_request_head_over_16_kib_is_refused(api: tuple[str, Path]) -> None:
    answer = httpx.get(f"{api[0]}/v1/health", headers={"X-Big": "b" * 20000})
    assert answer.status_code == 431
    assert answer.json()["message"].endswith(
        "bytes; the limit is 16384 bytes (request line and headers)"
    )
    assert httpx.get(f"{api[0]}/v1/health", headers={"X-Big": "b" * 8000}).status_code == 200


def test_a_runs_folder_symlinked_outside_the_root_is_neither_listed_nor_written(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    (outside / ("run_" + "2" * 64)).mkdir(parents=True)
    (root / "runs").symlink_to(outside)
    (root / "tp_limits_echo2.py").write_text(TOOLS, encoding="utf-8")
    (root / "echo.toml").write_text('[[python]]\nmodule = "tp_limits_echo2"\n', "utf-8")
    port = free_port()
    args = ["serve-api", "--root", str(root), "--port", str(port), "--no-auth"]
    with spawn(args, port):
        listing = httpx.get(f"http://127.0.0.1:{port}/v1/runs")
        created = httpx.post(
            f"http://127.0.0.1:{port}/v1/runs", json=spec("echo.toml", "hi"), timeout=60
        )
    assert (listing.status_code, listing.json()) == (200, {"runs": [], "next_cursor": None})
    assert created.status_code == 422
    assert created.json()["message"] == (
        "runs folder 'runs' resolves outside the artifact root <root> (symlinks are followed)"
    )
    assert sorted(p.name for p in outside.iterdir()) == ["run_" + "2" * 64]
