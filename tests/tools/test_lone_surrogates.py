"""Strings with no UTF-8 form (a lone surrogate) are refused by one documented rule.

``os.listdir`` gives a Latin-1 file name as a ``str`` holding a lone surrogate
(``surrogateescape``); it has no exact UTF-8 form, so it is no JSON string (RFC 8259
section 8.1). A tool result holding one is an ``invalid_result`` failure naming where;
arguments holding one are ``invalid_arguments``; a recorded session records the failure
and verifies, never crashing after the body ran.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import toolproof
from toolproof import Tool, Toolset


def listing(folder: str) -> list[str]:
    """A directory listing as ``os.listdir`` gives one for a Latin-1 name."""
    return ["ok.txt", "caf\udce9.txt"]


def keyed(name: str) -> dict[str, int]:
    """An object whose key holds a lone surrogate."""
    return {"b\udcff": 1}


def plain(name: str) -> str:
    """A str result with a lone surrogate."""
    return "caf\udce9"


def test_a_result_with_a_lone_surrogate_is_an_invalid_result_naming_where() -> None:
    result = asyncio.run(Tool.from_function(listing).call({"folder": "/tmp"}))
    assert result.ok is False and result.failure is not None
    assert (result.failure.kind, result.failure.where) == ("invalid_result", "output")
    assert result.failure.message == (
        "tool 'listing' returned a value that is not plain JSON: $[1]: string has a lone "
        "surrogate U+DCE9 at index 3 (no UTF-8 form: RFC 8259 8.1)"
    )
    top = asyncio.run(Tool.from_function(plain).call({"name": "x"}))
    assert top.failure is not None and top.failure.message.endswith(
        "not plain JSON: $: string has a lone surrogate U+DCE9 at index 3 (no UTF-8 form: "
        "RFC 8259 8.1)"
    )
    key = asyncio.run(Tool.from_function(keyed).call({"name": "x"}))
    assert key.failure is not None and key.failure.message.endswith(
        "not plain JSON: $: key string has a lone surrogate U+DCFF at index 1 (no UTF-8 "
        "form: RFC 8259 8.1)"
    )


def test_arguments_with_a_lone_surrogate_are_invalid_arguments() -> None:
    result = asyncio.run(Tool.from_function(plain).call({"name": "\ud800"}))
    assert result.failure is not None
    assert result.failure.kind == "invalid_arguments"
    assert result.failure.message == (
        "invalid arguments for tool 'plain': $.name: string has a lone surrogate U+D800 at "
        "index 0 (no UTF-8 form: RFC 8259 8.1) (arguments must be plain JSON)"
    )


def test_a_recorded_session_records_the_failure_and_verifies(tmp_path: Path) -> None:
    async def go() -> tuple[toolproof.ToolResult, str | None]:
        toolset = Toolset()
        toolset.add(Tool.from_function(listing))
        toolset.seal()
        async with toolproof.record_session(toolset, root=tmp_path, task="List.") as session:
            result = await session.call("listing", {"folder": "/tmp"})
        return result, session.run_id

    result, run_id = asyncio.run(go())
    assert result.failure is not None and result.failure.kind == "invalid_result"
    assert run_id is not None
    run = tmp_path / "runs" / run_id
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    (returned,) = [e for e in events if e["type"] == "tool_returned"]
    assert returned["result"]["ok"] is False
    assert returned["result"]["failure"]["message"] == result.failure.message
    assert toolproof.verify_run(run).ok is True
