"""Tools from Python functions: schemas, annotations, calls (tools/function.py).

This module uses ``from __future__ import annotations`` on purpose, and ``forward``
refers to ``Box``, defined at the bottom of the module.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import annotated_types
import pytest
from pydantic import BaseModel, Field

import toolproof
from toolproof import (
    Tool,
    ToolAnnotations,
    ToolBindError,
    ToolCallError,
    ToolContribution,
    ToolFailure,
    ToolResult,
    bind_contribution,
)


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


class Point(BaseModel):
    x: int
    y: int = 0


def defaults(a: int, b: float = 1.5, c: str = "x", d: bool = False) -> int:
    """Add things."""
    return a


def optional(a: Optional[int] = None, b: str | None = None) -> None:  # noqa: UP045
    return None


def literal(mode: Literal["fast", "slow"] = "fast", unit: Unit = Unit.CELSIUS) -> str:
    return f"{mode}/{unit.value}"


def nested(p: Point, ps: list[Point]) -> Point:
    return Point(x=p.x + sum(q.x for q in ps), y=p.y)


def containers(
    tags: list[str], scores: dict[str, float], pair: list[int] | None = None
) -> dict[str, int]:
    return {tag: len(tag) for tag in tags}


def annotated(
    n: Annotated[int, Field(description="how many", ge=1)],
    s: Annotated[str, "a note"],
    k: Annotated[int, annotated_types.Lt(10)] = 0,
) -> list[str]:
    return [s] * n


def forward(box: Box) -> Box:
    return box


def google(city: str, days: int = 1) -> str:
    """Get the forecast.

    Longer text about it.

    Args:
        city: the city name.
        days: how many days ahead.

    Returns:
        The forecast.
    """
    return city


def numpy(city: str, days: int = 1) -> str:
    """Get the forecast.

    Parameters
    ----------
    city : str
        the city name.
    days : int
        how many days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return city


def positional(a: int, b: int, /, c: int = 0) -> int:
    return a - b + c


def keyword_only(*, limit: int = 10, query: str) -> list[str]:
    return [query] * limit


async def async_fn(x: int) -> int:
    return x * 2


def untyped(x, y=2):  # type: ignore[no-untyped-def]
    return [x, y]


def obj(props: dict[str, Any], *, extra: int = 0) -> dict[str, Any]:
    return props


POINT = {
    "properties": {"x": {"type": "integer"}, "y": {"default": 0, "type": "integer"}},
    "required": ["x"],
    "type": "object",
}
BOX = {
    "properties": {"items": {"items": {"type": "string"}, "type": "array"}},
    "required": ["items"],
    "type": "object",
}
FORECAST_IN = {
    "additionalProperties": False,
    "properties": {
        "city": {"description": "the city name.", "type": "string"},
        "days": {"default": 1, "description": "how many days ahead.", "type": "integer"},
    },
    "required": ["city"],
    "type": "object",
}


def obj_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "additionalProperties": False,
        "properties": properties,
        "type": "object",
    }
    if required:
        schema["required"] = required
    return schema


SHAPES: list[tuple[Callable[..., Any], dict[str, Any], Any, str]] = [
    (
        defaults,
        obj_schema(
            {
                "a": {"type": "integer"},
                "b": {"default": 1.5, "type": "number"},
                "c": {"default": "x", "type": "string"},
                "d": {"default": False, "type": "boolean"},
            },
            ["a"],
        ),
        {"type": "integer"},
        "Add things.",
    ),
    (
        optional,
        obj_schema(
            {
                "a": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                "b": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            }
        ),
        None,
        "",
    ),
    (
        literal,
        {
            "$defs": {"Unit": {"enum": ["c", "f"], "type": "string"}},
            **obj_schema(
                {
                    "mode": {"default": "fast", "enum": ["fast", "slow"], "type": "string"},
                    "unit": {"$ref": "#/$defs/Unit", "default": "c"},
                }
            ),
        },
        {"type": "string"},
        "",
    ),
    (
        nested,
        {
            "$defs": {"Point": POINT},
            **obj_schema(
                {
                    "p": {"$ref": "#/$defs/Point"},
                    "ps": {"items": {"$ref": "#/$defs/Point"}, "type": "array"},
                },
                ["p", "ps"],
            ),
        },
        POINT,
        "",
    ),
    (
        containers,
        obj_schema(
            {
                "tags": {"items": {"type": "string"}, "type": "array"},
                "scores": {"additionalProperties": {"type": "number"}, "type": "object"},
                "pair": {
                    "anyOf": [{"items": {"type": "integer"}, "type": "array"}, {"type": "null"}],
                    "default": None,
                },
            },
            ["tags", "scores"],
        ),
        {"additionalProperties": {"type": "integer"}, "type": "object"},
        "",
    ),
    (
        annotated,
        obj_schema(
            {
                "n": {"description": "how many", "minimum": 1, "type": "integer"},
                "s": {"description": "a note", "type": "string"},
                "k": {"default": 0, "exclusiveMaximum": 10, "type": "integer"},
            },
            ["n", "s"],
        ),
        {"items": {"type": "string"}, "type": "array"},
        "",
    ),
    (
        forward,
        {"$defs": {"Box": BOX}, **obj_schema({"box": {"$ref": "#/$defs/Box"}}, ["box"])},
        BOX,
        "",
    ),
    (google, FORECAST_IN, {"type": "string"}, "Get the forecast.\n\nLonger text about it."),
    (numpy, FORECAST_IN, {"type": "string"}, "Get the forecast."),
    (
        positional,
        obj_schema(
            {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "c": {"default": 0, "type": "integer"},
            },
            ["a", "b"],
        ),
        {"type": "integer"},
        "",
    ),
    (
        keyword_only,
        obj_schema(
            {"limit": {"default": 10, "type": "integer"}, "query": {"type": "string"}},
            ["query"],
        ),
        {"items": {"type": "string"}, "type": "array"},
        "",
    ),
    (async_fn, obj_schema({"x": {"type": "integer"}}, ["x"]), {"type": "integer"}, ""),
    (untyped, obj_schema({"x": {}, "y": {"default": 2}}, ["x"]), None, ""),
    (
        obj,
        obj_schema(
            {
                "props": {"additionalProperties": True, "type": "object"},
                "extra": {"default": 0, "type": "integer"},
            },
            ["props"],
        ),
        {"additionalProperties": True, "type": "object"},
        "",
    ),
]


@pytest.mark.parametrize(
    ("fn", "input_schema", "output_schema", "description"),
    SHAPES,
    ids=[shape[0].__name__ for shape in SHAPES],
)
def test_schema_from_signature(
    fn: Callable[..., Any], input_schema: dict[str, Any], output_schema: Any, description: str
) -> None:
    spec = Tool.from_function(fn).spec
    assert spec.name == fn.__name__
    assert spec.input_schema == input_schema
    assert spec.output_schema == output_schema
    assert spec.description == description


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("fn", "arguments", "value"),
    [
        (defaults, {"a": 3}, 3),
        (literal, {"unit": "f"}, "fast/f"),
        (nested, {"p": {"x": 1, "y": 5}, "ps": [{"x": 2}, {"x": 3}]}, {"x": 6, "y": 5}),
        (containers, {"tags": ["ab", "c"], "scores": {}}, {"ab": 2, "c": 1}),
        (annotated, {"n": 2, "s": "hi"}, ["hi", "hi"]),
        (forward, {"box": {"items": ["a"]}}, {"items": ["a"]}),
        (positional, {"a": 5, "b": 2, "c": 1}, 4),
        (keyword_only, {"query": "q", "limit": 2}, ["q", "q"]),
        (async_fn, {"x": 21}, 42),
        (untyped, {"x": "any"}, ["any", 2]),
    ],
)
def test_calls_pass_arguments_as_the_signature_expects(
    fn: Callable[..., Any], arguments: dict[str, Any], value: Any
) -> None:
    result = run(Tool.from_function(fn).call(arguments))
    assert (result.ok, result.value) == (True, value)


def test_invalid_arguments_do_not_reach_the_body() -> None:
    called: list[int] = []

    def count(a: int) -> int:
        called.append(a)
        return a

    tool = Tool.from_function(count)
    wrong_type = run(tool.call({"a": "5"}))
    unknown = run(tool.call({"a": 1, "z": 2}))
    constrained = run(Tool.from_function(annotated).call({"n": 0, "s": "x"}))
    assert wrong_type.failure is not None
    assert wrong_type.failure.kind == "invalid_arguments"
    assert wrong_type.failure.message == (
        "invalid arguments for tool 'count': argument 'a': \"5\" is not of type \"integer\""
    )
    assert unknown.failure is not None
    assert unknown.failure.message == (
        "invalid arguments for tool 'count': Additional properties are not allowed "
        "('z' was unexpected)"
    )
    assert constrained.failure is not None
    assert constrained.failure.message == (
        "invalid arguments for tool 'annotated': argument 'n': 0 is less than the minimum of 1"
    )
    assert called == []


def test_overrides_name_description_version() -> None:
    spec = Tool.from_function(defaults, name="plus", description="Plus.", version="3").spec
    assert (spec.name, spec.description, spec.version) == ("plus", "Plus.", "3")


def test_decorator_sets_mcp_annotations_and_keeps_the_function() -> None:
    @toolproof.tool(
        read_only=True,
        idempotent=True,
        open_world=False,
        title="Look up",
        name="lookup",
        version="2",
    )
    def look(item: str) -> str:
        return item.upper()

    assert look("a") == "A"
    tool = Tool.from_function(look)
    assert (tool.spec.name, tool.spec.version) == ("lookup", "2")
    assert tool.spec.annotations == ToolAnnotations(
        title="Look up", readOnlyHint=True, idempotentHint=True, openWorldHint=False
    )
    assert tool.spec.annotations.is_destructive is False
    assert tool.source == f"python:{__name__}.{look.__qualname__}"

    @toolproof.tool
    def bare(x: int) -> int:
        return x

    assert Tool.from_function(bare).spec.annotations == ToolAnnotations()


@pytest.mark.parametrize("kind", ["args", "kwargs"])
def test_var_args_are_refused(kind: str) -> None:
    def star(*args: int) -> int:
        return 0

    def double_star(**kwargs: int) -> int:
        return 0

    fn = star if kind == "args" else double_star
    with pytest.raises(ToolBindError) as caught:
        Tool.from_function(fn)
    assert str(caught.value) == (
        f"cannot bind tool '{fn.__name__}': parameter '{kind}': bare *args/**kwargs cannot be "
        "described by a JSON Schema; declare every parameter"
    )
    assert (caught.value.tool, caught.value.field) == (fn.__name__, f"parameter '{kind}'")


def test_unresolvable_annotation_is_refused() -> None:
    def broken(x: Missing) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 0

    with pytest.raises(ToolBindError) as caught:
        Tool.from_function(broken)
    assert str(caught.value) == (
        "cannot bind tool 'broken': annotations: cannot resolve the annotations: "
        "name 'Missing' is not defined"
    )


def test_sync_body_runs_in_a_thread_while_an_async_body_runs() -> None:
    started = threading.Event()
    release = threading.Event()
    order: list[str] = []
    threads: dict[str, int] = {}

    def slow_sync() -> str:
        threads["sync"] = threading.get_ident()
        order.append("sync started")
        started.set()
        released = release.wait(timeout=60)  # guard against a deadlock only
        order.append("sync finished")
        return "released" if released else "stuck"

    async def fast_async() -> str:
        threads["loop"] = threading.get_ident()
        while not started.is_set():  # yields to the loop; a blocked loop never gets here
            await asyncio.sleep(0.001)
        order.append("async released the sync body")
        release.set()
        return "done"

    async def scenario() -> tuple[Any, Any]:
        sync_tool = Tool.from_function(slow_sync)
        async_tool = Tool.from_function(fast_async)
        return await asyncio.gather(sync_tool.call({}), async_tool.call({}))

    sync_result, async_result = run(scenario())
    assert (sync_result.value, async_result.value) == ("released", "done")
    assert order == ["sync started", "async released the sync body", "sync finished"]
    assert threads["sync"] != threads["loop"]


def test_raising_body_is_a_tool_error_never_a_success() -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad input {x}")

    result = run(Tool.from_function(boom).call({"x": 7}))
    assert result.ok is False
    assert result.failure == ToolFailure(
        kind="tool_error",
        message="tool 'boom' raised ValueError: bad input 7",
        where="body",
        detail={"exception": "builtins.ValueError"},
    )


def test_body_raising_tool_call_error_reports_that_failure() -> None:
    failure = ToolFailure(kind="unavailable", message="shop closed", retryable=True)

    async def closed() -> str:
        raise ToolCallError(failure)

    result = run(Tool.from_function(closed).call({}))
    assert result.failure == failure


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            lambda: {1, 2},
            "tool 'f' returned a value that is not plain JSON: $: builtins.set is not a JSON value",
        ),
        (
            lambda: {"a": (1,)},
            "tool 'f' returned a value that is not plain JSON: $.a: "
            "builtins.tuple is not a JSON value",
        ),
        (
            lambda: float("nan"),
            "tool 'f' returned a value that is not plain JSON: $: nan is not a JSON number",
        ),
    ],
)
def test_non_json_result_is_invalid_result(fn: Callable[[], Any], message: str) -> None:
    result = run(Tool.from_function(fn, name="f").call({}))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.where, result.failure.message) == (
        "invalid_result",
        "output",
        message,
    )


def returns_wrong_type() -> int:
    return "nope"  # type: ignore[return-value]


def returns_inf() -> dict[str, float]:
    return {"a": float("inf")}


def test_result_breaking_the_return_annotation_is_invalid_result() -> None:
    wrong = run(Tool.from_function(returns_wrong_type).call({}))
    infinite = run(Tool.from_function(returns_inf).call({}))
    assert wrong.failure is not None
    assert wrong.failure.kind == "invalid_result"
    assert wrong.failure.message == (
        "tool 'returns_wrong_type' returned a value that breaks its output schema: "
        '/: "nope" is not of type "integer"'
    )
    assert infinite.failure is not None
    assert infinite.failure.message == (
        "tool 'returns_inf' returned a value that is not plain JSON: $.a: inf is not a JSON number"
    )


def test_cancellation_propagates() -> None:
    async def scenario() -> None:
        entered = asyncio.Event()

        async def wait_forever() -> str:
            entered.set()
            await asyncio.Event().wait()
            return "never"

        task = asyncio.create_task(Tool.from_function(wait_forever).call({}))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    run(scenario())


class Box(BaseModel):
    items: list[str]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"x": (1, 2)}, "$.x: builtins.tuple is not a JSON value"),
        ({"x": {1, 2}}, "$.x: builtins.set is not a JSON value"),
        ({"x": b"raw"}, "$.x: builtins.bytes is not a JSON value"),
        ({"x": object()}, "$.x: builtins.object is not a JSON value"),
        ({"x": 1, "y": {"k": float("nan")}}, "$.y.k: nan is not a JSON number"),
        ({"x": {1: "a"}}, "$.x: key 1 is int, not str"),
        (
            {"x": 1, "\ud800": 2},
            "$: key string has a lone surrogate U+D800 at index 0 (no UTF-8 form: RFC 8259 8.1)",
        ),
        (
            {"x": ["a", "\udce9"]},
            "$.x[1]: string has a lone surrogate U+DCE9 at index 0 (no UTF-8 form: RFC 8259 8.1)",
        ),
    ],
)
def test_non_json_arguments_are_refused_not_raised(arguments: dict[str, Any], problem: str) -> None:
    result = run(Tool.from_function(untyped).call(arguments))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == (
        "invalid_arguments",
        f"invalid arguments for tool 'untyped': {problem} (arguments must be plain JSON)",
    )


def test_arguments_that_are_not_an_object() -> None:
    result = run(Tool.from_function(untyped).call([1, 2]))
    assert result.failure is not None
    assert result.failure.message == (
        "invalid arguments for tool 'untyped': arguments must be a JSON object, not list"
    )


def reserved(json: str, schema: int = 1, _hidden: int = 2, model_id: str = "m") -> list[Any]:
    return [json, schema, _hidden, model_id]


def test_parameter_names_pydantic_reserves_keep_their_names() -> None:
    tool = Tool.from_function(reserved)
    assert tool.spec.input_schema == obj_schema(
        {
            "json": {"type": "string"},
            "schema": {"default": 1, "type": "integer"},
            "_hidden": {"default": 2, "type": "integer"},
            "model_id": {"default": "m", "type": "string"},
        },
        ["json"],
    )
    result = run(tool.call({"json": "j", "schema": 3, "_hidden": 4, "model_id": "x"}))
    assert result.value == ["j", 3, 4, "x"]
    assert run(tool.call({"json": "j"})).value == ["j", 1, 2, "m"]


def test_a_schema_that_is_not_json_is_refused_at_bind_time() -> None:
    def nan_default(x: float = float("nan")) -> float:
        return x

    with pytest.raises(ToolBindError) as caught:
        Tool.from_function(nan_default)
    assert str(caught.value) == (
        "cannot bind tool 'nan_default': input_schema.properties.x.default: not JSON: "
        "nan is not a JSON number (NaN and Infinity are refused)"
    )


class Adder:
    """Add a constant (class docs)."""

    def __init__(self, k: int) -> None:
        self.k = k

    async def __call__(self, x: int) -> int:
        """Add the constant.

        Args:
            x: the number.
        """
        return x + self.k


class Incrementer:
    def __call__(self, x: int) -> int:
        return x + 1


def test_callable_objects_are_described_by_their_call() -> None:
    adder = Tool.from_function(Adder(3))
    assert (adder.spec.name, adder.spec.description) == ("Adder", "Add the constant.")
    assert adder.spec.input_schema == obj_schema(
        {"x": {"description": "the number.", "type": "integer"}}, ["x"]
    )
    assert run(adder.call({"x": 1})).value == 4
    plain = Tool.from_function(Incrementer(), name="inc")
    assert (plain.spec.name, plain.spec.description) == ("inc", "")
    assert run(plain.call({"x": 1})).value == 2


def fast(a: int, b: float = 0.5, *, tags: list[str] | None = None) -> dict[str, float]:
    return {"sum": a + b, "tags": float(len(tags or []))}


class Colour(enum.Enum):
    RED = "red"


def slow(colour: Colour) -> str:
    return f"{type(colour).__name__}.{colour.name}"


def test_plain_json_parameters_reach_the_function_as_sent() -> None:
    # int, float, list[str] | None need no conversion: the body gets the caller's values
    result = run(Tool.from_function(fast).call({"a": 2, "tags": ["x"]}))
    assert result.value == {"sum": 2.5, "tags": 1.0}


def test_parameters_that_need_conversion_still_go_through_pydantic() -> None:
    assert run(Tool.from_function(slow).call({"colour": "red"})).value == "Colour.RED"


def reports_its_own_failure(item: str) -> dict[str, str]:
    return ToolResult.fail("tool_error", f"no {item}", where="body")  # type: ignore[return-value]


def test_a_function_returning_a_tool_result_is_passed_through() -> None:
    result = run(Tool.from_function(reports_its_own_failure).call({"item": "pear"}))
    assert result.failure is not None
    assert (result.failure.kind, result.failure.message) == ("tool_error", "no pear")


class _Counts(BaseModel):
    k: int
    ks: list[int]


def _kinds(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _kinds(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_kinds(item) for item in value]
    return type(value).__name__


def _int_n(n: int) -> Any:
    return _kinds(n)


def _int_list(n: list[int]) -> Any:
    return _kinds(n)


def _int_dict(n: dict[str, int]) -> Any:
    return _kinds(n)


def _int_optional(n: int | None = None) -> Any:
    return _kinds(n)


def _int_model(n: _Counts) -> Any:
    return [_kinds(n.k), _kinds(n.ks)]


def _int_literal(n: Literal[1, 2]) -> Any:
    return _kinds(n)


def _int_positional(n: int, /, k: int) -> Any:
    return [_kinds(n), _kinds(k)]


async def _int_async(n: Annotated[int, Field(ge=0)]) -> Any:
    return _kinds(n)


def _float_n(n: float) -> Any:
    return _kinds(n)


@pytest.mark.parametrize(
    ("fn", "arguments", "kinds"),
    [
        (_int_n, {"n": 1.0}, "int"),
        (_int_list, {"n": [1.0, 2]}, ["int", "int"]),
        (_int_dict, {"n": {"a": 1.0}}, {"a": "int"}),
        (_int_optional, {"n": 1.0}, "int"),
        (_int_model, {"n": {"k": 1.0, "ks": [2.0]}}, ["int", ["int"]]),
        (_int_literal, {"n": 1.0}, "int"),
        (_int_positional, {"n": 1.0, "k": 2.0}, ["int", "int"]),
        (_int_async, {"n": 3.0}, "int"),
        (_float_n, {"n": 1.0}, "float"),
    ],
)
def test_an_integral_float_reaches_an_int_parameter_as_an_int(
    fn: Any, arguments: dict[str, Any], kinds: Any
) -> None:
    # JSON Schema's "integer" accepts 1.0 (issue 12 item 10); the annotation says int
    result = asyncio.run(Tool.from_function(fn).call(arguments))
    assert result.ok, result.failure
    assert result.value == kinds


def test_an_int_parameter_gets_the_exact_value_of_a_large_integral_float() -> None:
    result = asyncio.run(Tool.from_function(_int_n).call({"n": 2.0**60}))
    assert result.value == "int"
    refused = asyncio.run(Tool.from_function(_int_n).call({"n": 1.5}))
    assert refused.failure is not None
    assert refused.failure.message == (
        "invalid arguments for tool '_int_n': argument 'n': 1.5 is not of type \"integer\""
    )


def test_a_declared_tool_still_receives_the_float_it_was_sent() -> None:
    seen: list[Any] = []

    async def invoke(arguments: dict[str, Any]) -> Any:
        seen.append(arguments)
        return "ok"

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tool = bind_contribution(ToolContribution("d", "D.", schema, invoke))
    assert asyncio.run(tool.call({"n": 1.0})).ok
    assert seen == [{"n": 1.0}] and type(seen[0]["n"]) is float  # DESIGN section 4
