"""The inline call path of ``Tool.from_function`` (issue 14 point 6): same outcomes as the body.

An async function whose arguments need no conversion runs inside ``Tool.call``
itself; these tests pin that every outcome is what the general body path gives:
through ``call``, through ``run_validated`` (what a layer's ``call_next`` uses) and
through a pass-through variant, with and without telemetry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolproof import Tool, ToolCallError, ToolFailure, ToolResult
from toolproof.extensions import ComboElement, ExtensionRegistry, build_combo, wrapper
from toolproof.extensions.wrappers.deadlines import resume
from toolproof.tools.tool import settled_types


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
    """The result of ``arguments`` through call, run_validated and a pass-through variant."""
    variant = passthrough(tool)
    results = [
        run(tool.call(arguments)),
        run(tool.run_validated(arguments)),
        run(variant.call(arguments)),
    ]
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
def test_failures_of_the_inline_path_are_those_of_the_body(
    x: str, failure: tuple[str, str]
) -> None:
    results = outcomes(Tool.from_function(untyped), {"x": x})
    assert results[0] == results[1] == results[2]
    kind, message = failure
    assert results[0]["ok"] is False
    assert results[0]["failure"]["kind"] == kind
    assert results[0]["failure"]["message"].startswith(message)


def test_a_json_value_passes_unchanged() -> None:
    assert [r["value"] for r in outcomes(Tool.from_function(untyped), {"x": "y"})] == [
        {"x": "y"}
    ] * 3


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


@pytest.mark.parametrize(
    ("schema", "types"),
    [
        (None, {str, int, bool, type(None)}),
        (True, {str, int, bool, type(None)}),
        ({}, {str, int, bool, type(None)}),
        ({"type": "integer"}, {int}),
        ({"type": "integer", "title": "N", "description": "a count"}, {int}),
        ({"type": ["string", "null"]}, {str, type(None)}),
        ({"type": "boolean"}, {bool}),
        ({"type": "number"}, set()),  # a float may be NaN: always walked
        ({"type": "integer", "minimum": 0}, set()),
        ({"type": "array", "items": {"type": "integer"}}, set()),
        ({"type": []}, set()),
        ({"type": "integer", "$ref": "#/$defs/x"}, set()),
        (False, set()),
    ],
)
def test_settled_types(schema: Any, types: set[type]) -> None:
    assert settled_types(schema) == types


def result_now(arguments: dict[str, Any]) -> Any:
    """A body that is not async: a ToolResult for ``x`` = ``ok`` / ``fail``, else an int."""
    if arguments["x"] == "ok":
        return ToolResult.success({"x": "ok"})
    if arguments["x"] == "fail":
        return ToolResult.fail("unavailable", "down", where="body")
    return 3


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        ("ok", {"ok": True, "value": {"x": "ok"}}),
        ("fail", ("unavailable", "down")),
        ("int", ("tool_error", "tool 'untyped' raised TypeError: ")),  # 3 is awaited: refused
    ],
)
def test_a_body_may_return_its_tool_result_itself_on_every_path(
    x: str, expected: Any, request: pytest.FixtureRequest
) -> None:
    tool = Tool(Tool.from_function(untyped).spec, result_now)
    results = outcomes(tool, {"x": x})
    exporter = request.getfixturevalue("exporter")  # with telemetry on, the hook runs the body
    results.append(run(tool.call({"x": x})).model_dump(mode="json"))
    assert [span.name for span in exporter.get_finished_spans()] == ["execute_tool untyped"]
    assert results[0] == results[1] == results[2] == results[3]
    if isinstance(expected, dict):
        assert {"ok": results[0]["ok"], "value": results[0]["value"]} == expected
    else:
        kind, message = expected
        assert results[0]["failure"]["kind"] == kind
        assert results[0]["failure"]["message"].startswith(message)


def stepped_outcomes(tool: Tool, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The result of ``arguments`` through run_validated_into and a ``timeout`` variant."""

    async def into() -> ToolResult:
        box: list[ToolResult] = []
        await tool.run_validated_into(arguments, box)
        [result] = box
        return result

    [(_, timed)] = build_combo(tool, [ComboElement("timeout", {"seconds": 30})])
    results = [run(into()), run(timed.call(arguments))]
    return [result.model_dump(mode="json") for result in results]


@pytest.mark.parametrize(
    ("fn", "arguments"),
    [
        (kinds, {"a": 1.0, "b": 2}),
        *((typed, {"a": a, "b": 2}) for a in range(5)),
        *((untyped, {"x": x}) for x in ("set", "tuple", "nan", "result", "raise", "call-error")),
        (untyped, {"x": "y"}),
    ],
)
def test_run_validated_into_and_a_timeout_layer_give_what_run_validated_gives(
    fn: Any, arguments: dict[str, Any]
) -> None:
    tool = Tool.from_function(fn)
    expected = run(tool.run_validated(arguments)).model_dump(mode="json")
    assert stepped_outcomes(tool, arguments) == [expected, expected]


def test_run_validated_into_yields_only_when_the_call_suspends() -> None:
    async def maybe_sleep(a: float) -> float:
        """Sleep ``a`` seconds when ``a`` > 0."""
        if a > 0:
            await asyncio.sleep(a)
        return a

    tool = Tool.from_function(maybe_sleep)
    box: list[ToolResult] = []
    assert list(tool.run_validated_into({"a": 0}, box)) == []  # ended in its first step
    assert [result.value for result in box] == [0]

    async def main() -> tuple[Any, list[ToolResult]]:
        box: list[ToolResult] = []
        step = tool.run_validated_into({"a": 0.01}, box)
        yielded = next(step)  # it suspends: StopIteration would fail the test
        assert box == []
        await resume(step, yielded)
        return yielded, box

    yielded, box = run(main())
    assert isinstance(yielded, asyncio.Future)  # the sleep's future, for the task
    assert [result.value for result in box] == [0.01]
