"""A recorded run served as a cassette: hits, a miss with the nearest call, overrides."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset, run

import toolproof
from toolproof import Tool, Toolset
from toolproof.contract.tools import ToolResult
from toolproof.errors import InputError
from toolproof.testing import Cassette

pytest_plugins = ["pytester"]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    return run(tmp_path, base_spec(), make_toolset(Counter())).path


def test_recorded_calls_are_served_without_calling_the_tool(recorded: Path) -> None:
    counter = Counter()
    cassette = Cassette(recorded)
    toolset = cassette.toolset(make_toolset(counter))
    result = asyncio.run(toolset["stock"].call({"item": "apple"}))
    assert result.value == {
        "count": 12,
        "item": "apple",
        "note": "Apples arrived on Monday.",
        "shelf": "A1",
    }
    total = asyncio.run(toolset["total"].call({"items": ["apple", "plum"]}))
    assert (total.value, counter.calls, cassette.served, cassette.misses) == (19, 0, 2, [])


def test_a_miss_fails_closed_with_the_nearest_call_as_a_diff(recorded: Path) -> None:
    cassette = Cassette(recorded)
    result = asyncio.run(cassette.toolset()["stock"].call({"item": "apricot"}))
    assert result.failure is not None and result.failure.kind == "cassette_miss"
    lines = result.failure.message.splitlines()
    assert lines[0] == (
        f'cassette {recorded.name}: no recorded call stock({{"item":"apricot"}}) '
        "(record mode 'none'); nearest recorded call:"
    )
    assert '-    "item": "apple"' in lines and '+    "item": "apricot"' in lines
    assert cassette.misses == [result.failure.message]


def test_an_override_supplies_a_result(recorded: Path) -> None:
    cassette = Cassette(recorded)
    cassette.override("stock", {"item": "kiwi"}, {"item": "kiwi", "count": 0})
    cassette.override("stock", {"item": "apple"}, ToolResult.fail("tool_error", "gone"))
    toolset = cassette.toolset()
    assert asyncio.run(toolset["stock"].call({"item": "kiwi"})).value == {
        "item": "kiwi",
        "count": 0,
    }
    failed = asyncio.run(toolset["stock"].call({"item": "apple"}))
    assert failed.failure is not None and failed.failure.message == "gone"


def test_a_tampered_run_is_refused(recorded: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "runs" / recorded.name
    shutil.copytree(recorded, copy)
    (copy / "claims.json").write_bytes(b"[]")
    with pytest.raises(InputError, match=r"^cassette .*: the run does not verify: claims.json"):
        Cassette(copy)


def test_the_pytest_fixture_fails_a_test_that_missed(
    recorded: Path, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        f"""
        import asyncio

        RUN = {json.dumps(str(recorded))}

        def test_hit(toolproof_cassette):
            toolset = toolproof_cassette(RUN).toolset()
            assert asyncio.run(toolset["stock"].call({{"item": "plum"}})).value["count"] == 7

        def test_miss(toolproof_cassette):
            toolset = toolproof_cassette(RUN).toolset()
            asyncio.run(toolset["stock"].call({{"item": "pear"}}))
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ['*no recorded call stock({"item":"pear"})*', '*+    "item": "pear"']
    )


def test_the_run_fixture_runs_a_spec_under_tmp_path(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from toolproof import Tool, Toolset
        from toolproof.testing import assert_frozen_replay, assert_run_conforms


        async def shelf(item: str) -> str:
            return "A1"


        def test_run(toolproof_run, tmp_path):
            toolset = Toolset()
            toolset.add(Tool.from_function(shelf, description="Shelf."))
            outcome = toolproof_run(
                {"task": "t", "steps": [{"id": "s", "tool": "shelf", "arguments": {"item": "x"}}]},
                toolset.seal(),
            )
            assert outcome.path.parent == tmp_path / "runs"
            assert_run_conforms(outcome.path)
            assert_frozen_replay(outcome.path)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def _repeated(tmp_path: Path) -> Path:
    """A run selling an apple twice, then a plum: the repeated identical call answers anew."""
    left = {"apple": 2, "plum": 5}

    async def sell(item: str) -> str:
        left[item] -= 1
        return f"{item}: {left[item]} left"

    toolset = Toolset()
    toolset.add(Tool.from_function(sell, description="Sell one item."))
    steps = [
        {"id": "a1", "tool": "sell", "arguments": {"item": "apple"}},
        {"id": "p1", "tool": "sell", "arguments": {"item": "plum"}},
        {"id": "a2", "tool": "sell", "arguments": {"item": "apple"}},
    ]
    spec = {"task": "Sell fruit.", "steps": steps, "reasoner": {"name": "tool-results"}}
    return run(tmp_path, spec, toolset.seal()).path


def test_repeated_identical_calls_are_served_in_recorded_order(tmp_path: Path) -> None:
    cassette = Cassette(_repeated(tmp_path))
    sell = cassette.toolset()["sell"]
    answers = [asyncio.run(sell.call({"item": "apple"})).value for _ in range(2)]
    assert answers == ["apple: 1 left", "apple: 0 left"]
    third = asyncio.run(sell.call({"item": "apple"}))
    assert third.failure is not None and third.failure.kind == "cassette_miss"
    assert third.failure.message == (
        f'cassette {cassette.path.name}: sell({{"item":"apple"}}) was recorded 2 times, and '
        "this is call 3 of it (repeated calls are served in recorded order, each once; record "
        "mode 'none')"
    )
    assert (cassette.served, cassette.misses) == (2, [third.failure.message])


def test_a_bad_record_mode_and_a_missing_cassette_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"record mode 'all' is not one of none, once, new_ep"):
        Cassette(tmp_path, "all")
    missing = tmp_path / "cassettes" / "stock"
    with pytest.raises(InputError) as refused:
        Cassette(missing)
    assert refused.value.message == (
        f"cassette {missing}: no such run directory (record mode 'none' only serves a "
        "recorded run; mode 'once' records it)"
    )
    with pytest.raises(InputError, match=r"record mode 'once' records calls, which needs the r"):
        Cassette(missing, "once").toolset()


def test_once_records_a_missing_cassette_then_only_serves_it(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "stock"
    counter = Counter()
    cassette = Cassette(path, "once")
    toolset = cassette.toolset(make_toolset(counter))
    for item in ("apple", "apple", "plum"):
        assert asyncio.run(toolset["stock"].call({"item": item})).ok
    assert (counter.calls, cassette.recorded_calls, cassette.served) == (3, 3, 0)
    run_id = asyncio.run(cassette.save())
    assert run_id is not None and run_id.startswith("run_")
    assert sorted(p.name for p in path.parent.iterdir()) == ["stock"]  # no scratch left
    assert toolproof.verify_run(path).ok

    again = Cassette(path, "once")
    assert again.recording is False
    served = again.toolset(make_toolset(counter))
    assert [c for c in again.calls] == [
        ("stock", {"item": "apple"}),
        ("stock", {"item": "apple"}),
        ("stock", {"item": "plum"}),
    ]
    assert asyncio.run(served["stock"].call({"item": "plum"})).value["shelf"] == "B4"
    missed = asyncio.run(served["stock"].call({"item": "pear"}))
    assert missed.failure is not None and missed.failure.kind == "cassette_miss"
    assert (counter.calls, asyncio.run(again.save())) == (3, None)


def test_new_episodes_serves_the_recorded_and_appends_the_new(tmp_path: Path) -> None:
    path = run(tmp_path, base_spec(), make_toolset(Counter())).path
    old_id = json.loads((path / "manifest.json").read_bytes())["run_id"]
    counter = Counter()
    cassette = Cassette(path, "new_episodes")
    toolset = cassette.toolset(make_toolset(counter))
    assert asyncio.run(toolset["stock"].call({"item": "plum"})).value["count"] == 7
    assert counter.calls == 0
    for _ in range(2):  # one recorded; the second runs live and is recorded
        assert asyncio.run(toolset["stock"].call({"item": "apple"})).value["count"] == 12
    assert asyncio.run(toolset["total"].call({"items": ["plum"]})).value == 7
    assert (counter.calls, cassette.served, cassette.recorded_calls) == (2, 2, 2)
    new_id = asyncio.run(cassette.save())
    assert new_id not in (None, old_id)
    assert json.loads((path / "manifest.json").read_bytes())["run_id"] == new_id
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert toolproof.verify_run(path).ok
    assert Cassette(path).calls == [
        ("stock", {"item": "apple"}),
        ("stock", {"item": "plum"}),
        ("total", {"items": ["apple", "plum"]}),
        ("stock", {"item": "apple"}),
        ("total", {"items": ["plum"]}),
    ]


def test_the_fixture_records_once_then_serves(tmp_path: Path, pytester: pytest.Pytester) -> None:
    cassette = tmp_path / "cassettes" / "stock"
    pytester.makepyfile(
        f"""
        import asyncio

        from toolproof import Tool, Toolset

        CASSETTE = {json.dumps(str(cassette))}
        LIVE = []


        async def shelf(item: str) -> str:
            LIVE.append(item)
            return {{"apple": "A1"}}.get(item, "none")


        def real():
            toolset = Toolset()
            toolset.add(Tool.from_function(shelf, description="Shelf of an item."))
            return toolset.seal()


        def test_shelf(toolproof_cassette):
            toolset = toolproof_cassette(CASSETTE, "once").toolset(real())
            assert asyncio.run(toolset["shelf"].call({{"item": "apple"}})).value == "A1"
            print("live calls:", len(LIVE))
        """
    )
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*live calls: 1*"])
    assert toolproof.verify_run(cassette).ok
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*live calls: 0*"])
