"""Values nested absurdly deep: refused in linear time, never a crash (issue 12 item 9).

Arguments nested 50,000 deep crashed the process (SIGSEGV in the validator's
recursion) and the plain-JSON check built a path string per level (quadratic).
"""

from __future__ import annotations

import asyncio
import functools
import time
import tracemalloc
from typing import Any

import pytest

from toolproof import (
    CanonicalizationError,
    Tool,
    ToolBindError,
    ToolContribution,
    bind_contribution,
    canonical_json,
)
from toolproof.schema.validation import MAX_ARGUMENT_DEPTH, json_problem

DEPTHS = [50_000, 1_000_000]
_RULE = (
    "nested deeper than 256 levels (rule: MAX_ARGUMENT_DEPTH, arrays and objects in arrays "
    "and objects)"
)


@functools.cache
def nest(depth: int, kind: str) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


async def _echo(arguments: dict[str, Any]) -> Any:
    return "ok"


async def _takes(x: list[Any]) -> int:
    return 1


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_arguments_are_invalid_arguments_through_every_tool_kind(
    depth: int, kind: str
) -> None:
    value = nest(depth, kind)
    declared = bind_contribution(ToolContribution("d", "D.", {"type": "object"}, _echo))
    for tool in (Tool.from_function(_takes), declared):
        start = time.perf_counter()
        result = asyncio.run(tool.call({"x": value}))
        # one-sided and generous: linear is well under 1 s; a path string per level
        # (the quadratic bug) is ~10**12 steps at a million levels and never ends in 30 s
        assert time.perf_counter() - start < 30.0
        assert result.failure is not None and result.failure.kind == "invalid_arguments"
        assert result.failure.message.endswith(_RULE + " (arguments must be plain JSON)")
    step = "[0]" if kind == "list" else ".a"
    assert json_problem({"x": value}) == (f"$.x{step * 5}...(244 levels)...{step * 6}: {_RULE}")


def test_the_plain_json_check_is_linear_in_depth() -> None:
    assert MAX_ARGUMENT_DEPTH == 256
    peaks = []  # bytes the check allocated at most: each level it walks holds its path
    for depth in (100_000, 1_000_000):
        value = nest(depth, "dict")
        tracemalloc.start()
        try:
            assert json_problem(value) == f"${'.a' * 6}...(244 levels)...{'.a' * 6}: {_RULE}"
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    # It stops at the first container past the limit: a million levels cost no more
    # than 100,000, and both what 257 levels need (~32 KB), not 100,000 paths (> 5 MB).
    assert peaks[1] <= peaks[0] < 100_000, peaks


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_canonical_json_refuses_deep_values(depth: int, kind: str) -> None:
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(nest(depth, kind))
    assert info.value.rule == "nested deeper than 256 levels"


@pytest.mark.parametrize("depth", DEPTHS)
def test_bind_refuses_deep_schemas(depth: int) -> None:
    schema: Any = {"type": "object", "default": nest(depth, "list")}
    with pytest.raises(ToolBindError) as info:
        bind_contribution(ToolContribution("d", "D.", schema, _echo))
    assert info.value.fields["rule"].startswith("nesting depth exceeds the limit of 64 levels")


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_a_deep_result_is_invalid_result_not_a_recursion_error(kind: str) -> None:
    value = nest(50_000, kind)

    async def deep() -> object:
        return value

    async def deep_any() -> Any:
        return value

    for fn in (deep, deep_any):
        result = asyncio.run(Tool.from_function(fn).call({}))
        assert result.failure is not None
        assert result.failure.kind == "invalid_result", result.failure.message
        assert "nested deeper than 256 levels" in result.failure.message
