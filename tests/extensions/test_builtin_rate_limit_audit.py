"""The ``rate_limit`` and ``audit`` wrappers."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from ext_support import Recorder, elements, make_tool, refusal, run

from toolproof import Tool
from toolproof.extensions import ApplyContext, build_combo
from toolproof.extensions.wrappers.rate_limit import TokenBucket
from toolproof.identity import digest_json


def variant(base: Tool, *items: Any, context: Any = None) -> Tool:
    return build_combo(base, elements(*items), context=context)[-1][1]


def test_token_bucket_reserves_in_order() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=4, burst=2, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.0, 0.25, 0.5]
    now[0] = 1.0
    assert bucket.reserve() == 0.0
    bucket.refund()
    assert bucket.reserve() == 0.0


def test_rate_limit_delays_and_never_drops() -> None:
    starts: list[float] = []

    async def body(arguments: dict[str, Any]) -> Any:
        starts.append(time.monotonic())
        return arguments["a"]

    tool = variant(make_tool(body=body), ("rate_limit", {"rate": 20, "burst": 1}))

    async def go() -> list[Any]:
        results = await asyncio.gather(*(tool.call({"a": n}) for n in range(5)))
        return [result.value for result in results]

    began = time.monotonic()
    assert asyncio.run(go()) == [0, 1, 2, 3, 4]
    assert time.monotonic() - began >= 0.19
    # token k is due 0.05 * k s after the first; a sleep never ends early
    offsets = [start - starts[0] for start in starts]
    assert all(offset >= 0.05 * k - 0.005 for k, offset in enumerate(offsets)), offsets


def test_rate_limit_cancelled_waiter_gives_its_token_back() -> None:
    tool = variant(make_tool(), ("rate_limit", {"rate": 2, "burst": 1}))

    async def go() -> float:
        began = time.monotonic()  # before the first token is taken
        assert (await tool.call({"a": 1})).ok
        waiting = asyncio.create_task(tool.call({"a": 1}))  # reserves the token due at +0.5 s
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (await tool.call({"a": 1})).ok
        return time.monotonic() - began

    # Without the refund this call's token is the one due at +1.0 s, and a sleep never
    # ends early: done before +1.0 s means it got the cancelled waiter's token (+0.5 s).
    assert asyncio.run(go()) < 1.0


def test_rate_limit_config_is_checked() -> None:
    assert refusal(make_tool(), ("rate_limit", {"rate": 0})) == (
        "cannot apply combo [rate_limit] to tool 'add': invalid config for extension "
        "'rate_limit': rate: 0.0 is not a rate: per second, a finite number above 0 and at "
        "most 1e+06"
    )


SECRET_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "password": {"type": "string"},
        "auth": {"type": "object"},
        "list": {"type": "array"},
    },
    "required": ["a"],
}


def test_audit_appends_one_redacted_line_per_call(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "audit.jsonl"
    log.parent.mkdir()
    log.write_text('{"earlier": true}\n', encoding="utf-8")
    body = Recorder(3, RuntimeError("boom"))
    config = {"path": "logs/audit.jsonl", "redact": ["/password", "/auth/token", "/list/1", "/zz"]}
    tool = variant(
        make_tool(body=body, schema=SECRET_SCHEMA),
        ("audit", config),
        context=ApplyContext(base_dir=tmp_path),
    )
    arguments = {"a": 1, "password": "hunter2", "auth": {"token": [1, 2]}, "list": [0, 5]}
    assert run(tool.call(arguments)).value == 3
    assert run(tool.call({"a": 2})).ok is False
    assert body.calls[0] == arguments
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"earlier": true}'
    first, second = (json.loads(line) for line in lines[1:])
    assert first["arguments"] == {
        "a": 1,
        "password": {"redacted": "string", "digest": digest_json("hunter2")},
        "auth": {"token": {"redacted": "array", "digest": digest_json([1, 2])}},
        "list": [0, {"redacted": "integer", "digest": digest_json(5)}],
    }
    assert "hunter2" not in lines[1]
    assert (first["tool"], first["ok"], first["value_digest"]) == (
        "add_audit",
        True,
        digest_json(3),
    )
    assert second["ok"] is False
    assert second["failure"] == {
        "kind": "tool_error",
        "message": "tool 'add' raised RuntimeError: boom",
        "where": "body",
    }
    assert set(first) == {"ts", "tool", "arguments", "ok", "value_digest", "duration_s"}


def test_audit_logs_cancelled_calls(tmp_path: Path) -> None:
    async def hang(arguments: dict[str, Any]) -> Any:
        await asyncio.sleep(60)

    tool = variant(
        make_tool(body=hang),
        ("audit", {"path": "a.jsonl"}),
        context=ApplyContext(base_dir=tmp_path),
    )

    async def go() -> None:
        task = asyncio.create_task(tool.call({"a": 1}))
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())
    [line] = (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["failure"]["kind"] == "cancelled"


def test_audit_redact_paths_must_be_json_pointers() -> None:
    assert refusal(make_tool(), ("audit", {"path": "a.jsonl", "redact": ["password"]})) == (
        "cannot apply combo [audit] to tool 'add': invalid config for extension 'audit': "
        "redact: 'password' is not a JSON Pointer (RFC 6901: starts with '/')"
    )
