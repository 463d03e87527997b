"""What a ``Tool.from_function`` call returns: argument ints, result checks, failures.

Each outcome is pinned through ``call`` and through a pass-through variant (whose
inner layer runs with ``run_validated``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolproof import Tool, ToolCallError, ToolFailure, ToolResult
from toolproof.extensions import ComboElement, ExtensionRegistry, build_combo, wrapper


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def kinds(a: int, b: int) -> list[str]:
    """Name the types the body received."""
    return [type(a).__name__, type(b).__name__]


async def typed(a: int, b: int) -> int:
    """Return whatever ``a`` selects (ints, a bool, a str, a float)."""
    return {0: b, 1: True, 2: "x", 3: 2.0, 4: a + b}[a]  # type: ignore[return-value]


async def untyped(x: str) -> Any:
    """Return a value per ``x``: a set, a tuple, NaN, a ToolResult, or raise."""
    if x == "set":
        return {1}
    if x == "tuple":
        return (1, 2)
    if x == "nan":
        return float("nan")
    if x == "result":
        return ToolResult.fail("unavailable", "down", where="body")
    if x == "raise":
        raise ValueError("no")
    if x == "call-error":
        raise ToolCallError(ToolFailure(kind="unavailable", message="told", where="body"))
    return {"x": x}


def passthrough(tool: Tool) -> Tool:
    registry = ExtensionRegistry()

    @wrapper(name="noop", registry=registry)
    async def noop(call_next: Any, arguments: dict[str, Any], config: Any) -> Any:
        return await call_next(arguments)

    [(_, variant)] = build_combo(tool, [ComboElement("noop")], registry=registry)
    return variant


def outcomes(tool: Tool, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The result of ``arguments`` through call and a pass-through variant."""
    variant = passthrough(tool)
    results = [run(tool.call(arguments)), run(variant.call(arguments))]
    return [result.model_dump(mode="json") for result in results]


def test_an_integral_float_reaches_an_int_parameter_as_an_int_and_the_caller_keeps_its_dict() -> (
    None
):
    tool = Tool.from_function(kinds)
    arguments = {"a": 1.0, "b": 2}
    assert run(tool.call(arguments)).value == ["int", "int"]
    assert run(tool.run_validated(arguments)).value == ["int", "int"]
    assert arguments == {"a": 1.0, "b": 2} and type(arguments["a"]) is float
    assert run(tool.call({"a": 1.5, "b": 2})).failure.kind == "invalid_arguments"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("a", "expected"),
    [
        (0, {"ok": True, "value": 2}),
        (4, {"ok": True, "value": 6}),
        (3, {"ok": True, "value": 2.0}),  # 2.0 is a JSON Schema integer
        (1, "invalid_result"),  # a bool is not an integer
        (2, "invalid_result"),
    ],
)
def test_a_typed_result_is_checked_against_the_output_schema_on_every_path(
    a: int, expected: Any
) -> None:
    for result in outcomes(Tool.from_function(typed), {"a": a, "b": 2}):
        if isinstance(expected, dict):
            assert {"ok": result["ok"], "value": result["value"]} == expected
        else:
            assert result["failure"]["kind"] == expected
            assert result["failure"]["where"] == "output"
            assert result["failure"]["message"].startswith(
                "tool 'typed' returned a value that breaks its output schema: /: "
            )


@pytest.mark.parametrize(
    ("x", "failure"),
    [
        ("set", ("invalid_result", "tool 'untyped' returned a value that is not plain JSON: ")),
        ("tuple", ("invalid_result", "tool 'untyped' returned a value that is not plain JSON: ")),
        ("nan", ("invalid_result", "tool 'untyped' returned a value that is not plain JSON: ")),
        ("result", ("unavailable", "down")),
        ("raise", ("tool_error", "tool 'untyped' raised ValueError: no")),
        ("call-error", ("unavailable", "told")),
    ],
)
def test_failures_of_a_function_tool(x: str, failure: tuple[str, str]) -> None:
    results = outcomes(Tool.from_function(untyped), {"x": x})
    assert results[0] == results[1]
    kind, message = failure
    assert results[0]["ok"] is False
    assert results[0]["failure"]["kind"] == kind
    assert results[0]["failure"]["message"].startswith(message)


def test_a_json_value_passes_unchanged() -> None:
    assert [r["value"] for r in outcomes(Tool.from_function(untyped), {"x": "y"})] == [
        {"x": "y"}
    ] * 2


def test_cancellation_of_an_inline_body_propagates() -> None:
    started = asyncio.Event()

    async def slow(a: int) -> int:
        started.set()
        await asyncio.sleep(60)
        return a

    async def main() -> None:
        task = asyncio.create_task(Tool.from_function(slow).call({"a": 1}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
