"""The ``cache`` wrapper: hits skip the body, keys are arguments + tool, only successes."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from ext_support import Recorder, elements, make_tool, run

from toolproof import Tool, Toolset
from toolproof.extensions import ApplyContext, build_combo


def cached(base: Tool, config: dict[str, Any] | None = None, context: Any = None) -> Tool:
    return build_combo(base, elements(("cache", config or {})), context=context)[-1][1]


def test_hit_skips_the_body_and_key_is_the_arguments() -> None:
    body = Recorder(10, 20, 30)
    tool = cached(make_tool(body=body))
    assert [run(tool.call(args)).value for args in ({"a": 1}, {"a": 1}, {"a": 2})] == [10, 10, 20]
    assert run(tool.call({"b": 1, "a": 1})).value == 30
    assert run(tool.call({"a": 1, "b": 1})).value == 30
    assert body.calls == [{"a": 1}, {"a": 2}, {"b": 1, "a": 1}]


def test_failures_are_not_cached() -> None:
    body = Recorder(RuntimeError("down"), 5)
    tool = cached(make_tool(body=body))
    assert run(tool.call({"a": 1})).ok is False
    assert run(tool.call({"a": 1})).value == 5
    assert run(tool.call({"a": 1})).value == 5
    assert len(body.calls) == 2


def test_ttl_expires_entries() -> None:
    body = Recorder(1, 2)
    tool = cached(make_tool(body=body), {"ttl": 0.05})
    assert run(tool.call({"a": 1})).value == 1
    time.sleep(0.1)
    assert run(tool.call({"a": 1})).value == 2


def test_memory_store_evicts_least_recently_used() -> None:
    body = Recorder(1, 2, 3, 4)
    tool = cached(make_tool(body=body), {"max_entries": 2})
    for a in (1, 2, 1, 3, 1, 2):
        run(tool.call({"a": a}))
    assert [call["a"] for call in body.calls] == [1, 2, 3, 2]


def test_cached_values_are_not_shared_objects() -> None:
    body = Recorder({"items": [1]})
    tool = cached(make_tool(body=body))
    first = run(tool.call({"a": 1})).value
    assert isinstance(first, dict)
    first["items"].append(2)
    assert run(tool.call({"a": 1})).value == {"items": [1]}


def test_sqlite_store_survives_a_new_toolset(tmp_path: Path) -> None:
    config = {"store": "sqlite", "path": "cache/tools.sqlite"}

    async def once(body: Recorder) -> Any:
        toolset = Toolset()
        context = ApplyContext(toolset=toolset, base_dir=tmp_path)
        async with toolset:
            return (await cached(make_tool(body=body), config, context).call({"a": 3})).value

    first, second = Recorder(42), Recorder(99)
    assert asyncio.run(once(first)) == 42
    assert asyncio.run(once(second)) == 42
    assert (len(first.calls), len(second.calls)) == (1, 0)
    with sqlite3.connect(tmp_path / "cache" / "tools.sqlite") as db:
        rows = db.execute("SELECT value FROM toolproof_cache").fetchall()
    db.close()
    assert rows == [("42",)]


def test_key_includes_the_tool_descriptor(tmp_path: Path) -> None:
    config = {"store": "sqlite", "path": "c.sqlite"}
    context = ApplyContext(base_dir=tmp_path)
    old = cached(make_tool(body=Recorder(1)), config, context)
    changed = cached(make_tool(body=Recorder(2), description="Changed."), config, context)
    assert run(old.call({"a": 1})).value == 1
    assert run(changed.call({"a": 1})).value == 2


def test_sqlite_requires_a_path() -> None:
    from ext_support import refusal

    assert refusal(make_tool(), ("cache", {"store": "sqlite"})) == (
        "cannot apply combo [cache] to tool 'add': invalid config for extension 'cache': "
        "(config): 'path' is required with store = 'sqlite' and only with it"
    )
