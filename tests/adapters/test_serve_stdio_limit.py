"""``toolproof serve`` over stdio bounds each message a client sends ([serve] max_message_bytes).

A real ``toolproof serve`` process reads a 40 MB line (over the 32 MiB default): it is
discarded as it arrives, answered with JSON-RPC ``-32600`` naming the limit (``id``
null: the request's id is inside the refused bytes), and the next request is served.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from serve_helpers import SERVE_CONFIG, TOOLPROOF

from toolproof.adapters.mcp.stdio import BoundedLines
from toolproof.contract.bounds import STDIO_MESSAGE_BYTES

HUGE = 40_000_000


def request(id_: int | None, method: str, params: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        body["id"] = id_
    return json.dumps(body).encode() + b"\n"


INITIALIZE = request(
    1,
    "initialize",
    {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
) + request(None, "notifications/initialized", {})


def test_a_message_over_the_limit_is_refused_with_32600_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    huge = request(3, "tools/call", {"name": "echo", "arguments": {"text": "x" * HUGE}})
    assert len(huge) > STDIO_MESSAGE_BYTES
    after = request(4, "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
    stderr = tmp_path / "stderr"
    with (
        stderr.open("wb") as err,
        subprocess.Popen(
            [*TOOLPROOF, "serve", "--config", str(SERVE_CONFIG)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ) as server,
    ):
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(INITIALIZE + huge + after)
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in range(3)]
        server.stdin.close()
        assert server.wait(60) == 0
    by_id = {answer["id"]: answer for answer in answers}
    assert set(by_id) == {1, None, 4}
    assert by_id[None] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "message refused: longer than the stdio limit of 33554432 bytes "
            "(32 MiB, [serve] max_message_bytes); it was discarded unread",
            "data": {"limit_bytes": 33554432},
        },
    }
    assert by_id[4]["result"]["content"] == [{"type": "text", "text": "still here"}]
    assert (
        "an MCP client sent a message longer than the stdio limit of 33554432 bytes "
        "([serve] max_message_bytes); it was discarded and answered with error -32600"
    ) in stderr.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("chunks", "lines", "refused"),
    [
        ([b"ab\ncd", b"efg\nhi"], ["ab", "cdefg", "hi"], 0),
        ([b"a" * 40, b"\nok\n"], ["ok"], 1),  # refused while it arrives, before its end
        ([b"ok\n" + b"b" * 33 + b"\nok\n"], ["ok", "ok"], 1),  # found whole in one chunk
        ([b"x" * 5000], [], 1),  # never ends
    ],
)
def test_bounded_lines_hold_at_most_the_limit(
    chunks: list[bytes], lines: list[str], refused: int
) -> None:
    read, write = os.pipe()
    seen: list[int] = []

    async def note() -> None:
        seen.append(1)

    async def main() -> list[str]:
        return [line async for line in BoundedLines(read, 32, note)]

    for chunk in chunks:
        os.write(write, chunk)
    os.close(write)
    try:
        assert anyio.run(main) == lines
    finally:
        os.close(read)
    assert len(seen) == refused
