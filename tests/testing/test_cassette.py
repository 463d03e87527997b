"""A recorded run served as a cassette: hits, a miss with the nearest call, overrides."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset, run

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
        f'cassette {recorded.name}: no recorded call stock({{"item":"apricot"}}); '
        "nearest recorded call:"
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
