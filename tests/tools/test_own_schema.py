"""A Python tool's own declared input schema: ``@toolproof.tool(input_schema={...})``."""

from __future__ import annotations

import asyncio
import copy
import itertools
from pathlib import Path
from typing import Any

import pytest

from toolproof import Context, Tool, ToolBindError, load_toolset, tool

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA: dict[str, Any] = {
    "$schema": DIALECT,
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "required": ["name"],
    "additionalProperties": False,
}
_COUNTER = itertools.count()


def _described(schema: dict[str, Any]) -> Any:
    @tool(input_schema=schema)
    def where(name: str, address: dict[str, str] | None = None) -> str:
        """Where someone lives."""
        return f"{name}: {address}"

    return where


def test_the_declared_schema_is_listed_as_given_and_never_mutated() -> None:
    declared = copy.deepcopy(SCHEMA)
    bound = Tool.from_function(_described(declared))
    assert bound.spec.input_schema == SCHEMA
    assert list(bound.spec.input_schema) == list(SCHEMA)  # order kept: $schema first
    assert bound.spec.input_schema is not declared
    assert bound.spec.description == "Where someone lives."
    assert bound.spec.output_schema == {"type": "string"}
    declared["properties"]["name"]["type"] = "integer"  # the declaration was copied
    assert bound.spec.input_schema["properties"]["name"] == {"type": "string"}


def test_calls_are_validated_by_the_declared_schema_and_get_the_json_as_sent() -> None:
    bound = Tool.from_function(_described(SCHEMA))
    ok = asyncio.run(bound.call({"name": "Ada", "address": {"city": "London"}}))
    assert ok.value == "Ada: {'city': 'London'}"
    assert asyncio.run(bound.call({"name": "Ada"})).value == "Ada: None"  # omitted: default
    bad = asyncio.run(bound.call({"name": "Ada", "address": {"city": 7}}))
    assert bad.failure is not None and bad.failure.kind == "invalid_arguments"
    assert bad.failure.message == (
        "invalid arguments for tool 'where': argument 'address/city': 7 is not of type \"string\""
    )
    extra = asyncio.run(bound.call({"name": "Ada", "zip": "N1"}))
    assert extra.failure is not None
    assert extra.failure.message == (
        "invalid arguments for tool 'where': Additional properties are not allowed "
        "('zip' was unexpected)"
    )


def test_a_context_parameter_stays_out_of_the_declared_schema() -> None:
    @tool(
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    async def count(ctx: Context, n: int = 1) -> int:
        await ctx.info("counting")
        return n * 2

    bound = Tool.from_function(count)
    assert asyncio.run(bound.call({"n": 4})).value == 8
    refused = asyncio.run(bound.call({"ctx": 1}))
    assert refused.failure is not None and refused.failure.kind == "invalid_arguments"


def _laughs(levels: int = 12) -> dict[str, Any]:
    defs: dict[str, Any] = {"l0": {"type": "string"}}
    for level in range(1, levels):
        defs[f"l{level}"] = {"anyOf": [{"$ref": f"#/$defs/l{level - 1}"}] * 10}
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"a": {"$ref": f"#/$defs/l{levels - 1}"}},
        "additionalProperties": False,
    }


def _ok(a: Any = None) -> Any:
    return a


def _two(a: Any = None, b: Any = None) -> Any:
    return a


def _needs(a: Any) -> Any:
    return a


def _positional(a: Any = None, /) -> Any:
    return a


def _spread(a: Any = None, **more: Any) -> Any:
    return a


ONE = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}


@pytest.mark.parametrize(
    ("schema", "fn", "field", "rule"),
    [
        (
            _laughs(),
            _ok,
            "input_schema.properties.a.$ref",
            "reference expansion exceeds the limit of 10000 subschemas (rule: "
            "SchemaLimits.max_expansion, default MAX_REF_EXPANSION; a $ref to a "
            "non-recursive target counts as the subschemas it expands to, so exponential "
            "fan-out is refused)",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "https://example.com/s.json"}},
                "additionalProperties": False,
            },
            _ok,
            "input_schema.properties.a.$ref",
            "remote $ref 'https://example.com/s.json' is refused (rule: only references "
            "inside the declaration resolve: '#...' fragments and resources embedded with "
            "$id; nothing is fetched)",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "strin"}},
                "additionalProperties": False,
            },
            _ok,
            "input_schema.properties.a.type",
            "\"strin\" is not valid under any of the schemas listed in the 'anyOf' keyword "
            "(rule: the schema must be valid against its JSON Schema metaschema)",
        ),
        (
            {"type": "array"},
            _ok,
            "input_schema.type",
            "a function's declared input schema must be an object schema "
            '("type": "object"): its properties are the parameters',
        ),
        (
            {"type": "object", "properties": {"a": {}}},
            _ok,
            "input_schema.additionalProperties",
            "a function's declared input schema must set additionalProperties: false (and no "
            "patternProperties): the function takes only its named parameters",
        ),
        (
            {**ONE, "patternProperties": {"^x": {}}},
            _ok,
            "input_schema.additionalProperties",
            "a function's declared input schema must set additionalProperties: false (and no "
            "patternProperties): the function takes only its named parameters",
        ),
        (
            ONE,
            _two,
            "parameter 'b'",
            "is not a property of the declared input_schema (properties: a)",
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False},
            _ok,
            "input_schema.properties.b",
            "no parameter of the function takes it (parameters: a)",
        ),
        (
            ONE,
            _needs,
            "parameter 'a'",
            "has no default, so the declared input_schema must list it in required",
        ),
        (
            ONE,
            _positional,
            "parameter 'a'",
            "is positional-only, so the declared input_schema must list it in required",
        ),
        (
            ONE,
            _spread,
            "parameter 'more'",
            "bare *args/**kwargs cannot be described by a JSON Schema; declare every parameter",
        ),
    ],
    ids=[
        "bomb",
        "remote-ref",
        "metaschema",
        "not-object",
        "open",
        "pattern",
        "param",
        "property",
        "required",
        "positional",
        "kwargs",
    ],
)
def test_a_declared_schema_that_breaks_a_rule_is_refused_at_bind(
    schema: dict[str, Any], fn: Any, field: str, rule: str
) -> None:
    with pytest.raises(ToolBindError) as info:
        Tool.from_function(tool(input_schema=schema)(fn), name="t")
    assert (info.value.fields["tool"], info.value.fields["field"]) == ("t", field)
    assert info.value.fields["rule"] == rule


def test_load_toolset_quarantines_a_function_whose_schema_does_not_fit(tmp_path: Path) -> None:
    module = f"tp_own_schema_{next(_COUNTER)}_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(
        "import toolproof\n\n"
        "SCHEMA = {'type': 'object', 'properties': {'x': {}}, 'additionalProperties': False}\n\n"
        "@toolproof.tool(input_schema=SCHEMA)\n"
        "def wrong(y=None):\n    return y\n\n"
        "@toolproof.tool(input_schema=SCHEMA)\n"
        "def right(x=None):\n    return x\n",
        encoding="utf-8",
    )
    config = tmp_path / "toolproof.toml"
    config.write_text(f'[[python]]\nmodule = "{module}"\n', encoding="utf-8")

    async def go() -> tuple[list[str], list[dict[str, Any]]]:
        async with load_toolset(config) as toolset:
            return toolset.names(), [q.to_json() for q in toolset.quarantined]

    names, quarantined = asyncio.run(go())
    assert names == ["right"]
    assert quarantined == [
        {
            "name": "wrong",
            "field": "parameter 'y'",
            "rule": "is not a property of the declared input_schema (properties: x)",
            "owner": f"python:{module}",
        }
    ]
