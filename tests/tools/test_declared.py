"""Declared tools: binding, exact delivery, metaschema refusals, quarantine (tools/declared.py)."""

from __future__ import annotations

import asyncio
import copy
import decimal
import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolproof
from toolproof import (
    SchemaLimits,
    ToolBindError,
    ToolCallError,
    ToolContribution,
    Toolset,
    bind_contribution,
    declarable_field,
)
from toolproof.adapters.cli.tools import _listing
from toolproof.tools.declared import bind_contributions


class Recorder:
    """An ``invoke`` that records exactly what it receives."""

    def __init__(self, result: Any = "ok") -> None:
        self.calls: list[Any] = []
        self.result = result

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.calls.append(arguments)
        return self.result


async def _invoke(arguments: dict[str, Any]) -> Any:
    return "ok"


def _bind(schema: Any, name: str = "t", invoke: Any = _invoke) -> toolproof.Tool:
    return bind_contribution(ToolContribution(name, "A tool.", schema, invoke))


def _call(tool: toolproof.Tool, arguments: Any) -> toolproof.ToolResult:
    return asyncio.run(tool.call(arguments))


DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "note": {"type": ["string", "null"], "default": "none"},
        "from": {"type": "string"},
        "_hidden": {"type": "boolean"},
        "model_config": {"type": "object"},
    },
    "required": ["query"],
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "q"},
        {"query": "q", "note": None},
        {"query": "q", "from": "x", "_hidden": True, "model_config": {"a": [1, None]}},
        {"query": "q", "limit": 3, "extra": {"nested": [1.5, "s"]}},
    ],
)
def test_body_receives_exactly_the_callers_object(arguments: dict[str, Any]) -> None:
    recorder = Recorder()
    tool = _bind(DEFAULTS_SCHEMA, invoke=recorder)
    sent = copy.deepcopy(arguments)
    result = _call(tool, sent)
    assert (result.ok, result.value) == (True, "ok")
    assert recorder.calls == [arguments]
    assert recorder.calls[0] is sent  # the caller's own object: nothing rebuilt


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": 5}, "argument 'query': 5 is not of type \"string\""),
        ({"query": "q", "limit": "5"}, 'argument \'limit\': "5" is not of type "integer"'),
        ({"query": "q", "limit": 1.5}, "argument 'limit': 1.5 is not of type \"integer\""),
        ({}, '"query" is a required property'),
    ],
)
def test_refused_arguments_never_reach_the_body(arguments: dict[str, Any], message: str) -> None:
    recorder = Recorder()
    result = _call(_bind(DEFAULTS_SCHEMA, invoke=recorder), arguments)
    assert result.failure is not None
    assert result.failure.kind == "invalid_arguments"
    assert result.failure.message == f"invalid arguments for tool 't': {message}"
    assert recorder.calls == []
    with pytest.raises(ToolCallError):
        result.unwrap()


def test_format_is_an_annotation_only() -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    assert _call(_bind(schema), {"when": "not a date"}).ok


def test_declared_draft_07_schema_is_honoured() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer"}, "day": {"type": "string", "format": "date"}},
    }
    tool = _bind(schema)
    assert _call(tool, {"n": 1, "day": "nope"}).ok  # format stays an annotation in draft 7 too
    assert not _call(tool, {"n": "1"}).ok


def test_declaration_is_deep_copied_and_never_mutated() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}}
    before = json.dumps(schema)
    tool = _bind(schema)
    assert json.dumps(schema) == before
    assert tool.spec.input_schema == schema
    schema["properties"]["a"]["$ref"] = "#/nowhere"
    assert tool.spec.input_schema["properties"]["a"] == {"$ref": "#/$defs/A"}
    assert _call(tool, {"a": 1}).ok


def test_schema_keeps_declaration_order_and_number_forms() -> None:
    schema = {"type": "object", "properties": {"z": {"maximum": 1.0}, "a": {"type": "number"}}}
    tool = _bind(MappingProxyType(schema))
    assert list(tool.spec.input_schema["properties"]) == ["z", "a"]
    assert type(tool.spec.input_schema["properties"]["z"]["maximum"]) is float


def test_invoke_is_captured_at_bind_time() -> None:
    first, second = Recorder("first"), Recorder("second")
    holder = {"invoke": first}

    async def late_lookup(arguments: dict[str, Any]) -> Any:
        return await holder["invoke"](arguments)

    contribution = ToolContribution("t", "A tool.", {"type": "object"}, first)
    tool = bind_contribution(contribution)
    object.__setattr__(contribution, "invoke", second)  # a later re-point has no effect
    assert _call(tool, {}).value == "first"
    assert second.calls == []
    assert _bind({"type": "object"}, invoke=late_lookup)  # an async function binds as is


def test_invoke_that_is_not_async_fails_the_call_not_the_process() -> None:
    def sync(arguments: dict[str, Any]) -> str:
        return "x"

    result = _call(_bind({"type": "object"}, invoke=sync), {})
    assert result.failure is not None
    assert result.failure.kind == "tool_error"
    assert "returned str, not an awaitable" in result.failure.message


def test_invoke_that_is_not_callable_is_refused() -> None:
    with pytest.raises(ToolBindError) as info:
        _bind({"type": "object"}, invoke="not callable")
    assert info.value.fields["field"] == "invoke"


@pytest.mark.parametrize(
    ("schema", "field", "rule_start"),
    [
        (
            {"type": "object", "properties": {"count": {"type": "integr"}}},
            "input_schema.properties.count.type",
            "\"integr\" is not valid under any of the schemas listed in the 'anyOf' keyword",
        ),
        (
            {"type": "object", "required": "name"},
            "input_schema.required",
            '"name" is not of type "array"',
        ),
        (
            {"type": "object", "properties": {"n": {"minimum": "1"}}},
            "input_schema.properties.n.minimum",
            '"1" is not of type "number"',
        ),
        (["type"], "input_schema", "must be a JSON Schema object (a JSON object), not list"),
        ("{}", "input_schema", "must be a JSON Schema object (a JSON object), not str"),
        (
            {"type": "object", "properties": {"a": {"maximum": float("nan")}}},
            "input_schema.properties.a.maximum",
            "is not plain JSON: nan is not a JSON number",
        ),
        (
            {"type": "object", "enum": [(1, 2)]},
            "input_schema.enum[0]",
            "is not plain JSON: tuple is not a JSON value",
        ),
    ],
)
def test_malformed_declarations_are_refused_naming_tool_and_field(
    schema: Any, field: str, rule_start: str
) -> None:
    with pytest.raises(ToolBindError) as info:
        _bind(schema, name="bad_tool")
    assert info.value.fields["tool"] == "bad_tool"
    assert info.value.fields["field"] == field
    assert str(info.value.fields["rule"]).startswith(rule_start)
    assert str(info.value).startswith(f"cannot bind tool 'bad_tool': {field}: ")


def test_boolean_root_schemas_mean_anything_and_nothing() -> None:
    recorder = Recorder()
    anything = _bind(True, invoke=recorder)
    assert anything.spec.input_schema == {}
    assert _call(anything, {"x": [1, None]}).ok
    nothing = _bind(False, invoke=recorder)
    assert nothing.spec.input_schema == {"not": {}}
    failure = _call(nothing, {}).failure
    assert failure is not None
    assert failure.kind == "invalid_arguments"
    assert recorder.calls == [{"x": [1, None]}]


def test_arguments_that_are_not_plain_json_are_refused() -> None:
    recorder = Recorder()
    schema = {"properties": {"n": {"type": "number"}, "a": {"type": "array"}}}
    tool = _bind(schema, invoke=recorder)
    for arguments, problem in [
        ({"n": decimal.Decimal("1.5")}, "$.n: decimal.Decimal is not a JSON value"),
        ({"n": float("nan")}, "$.n: nan is not a JSON number"),
        ({"a": (1, 2)}, "$.a: builtins.tuple is not a JSON value"),
    ]:
        result = _call(tool, arguments)
        assert result.failure is not None
        assert result.failure.message == (
            f"invalid arguments for tool 't': {problem} (arguments must be plain JSON)"
        )
    assert _call(tool, {"n": 2**60}).ok  # a big integer is JSON (only schemas are canonicalized)
    assert recorder.calls == [{"n": 2**60}]


def test_output_schema_is_checked_and_enforced() -> None:
    contribution = ToolContribution(
        "t", "A tool.", {"type": "object"}, Recorder(5), output_schema={"type": "string"}
    )
    result = _call(bind_contribution(contribution), {})
    assert result.failure is not None
    assert result.failure.kind == "invalid_result"
    bad = ToolContribution(
        "t", "d", {"type": "object"}, _invoke, output_schema={"$ref": "http://x.test/s"}
    )
    with pytest.raises(ToolBindError) as info:
        bind_contribution(bad)
    assert info.value.fields["field"] == "output_schema.$ref"


# --- declarable_field ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("city", True),
        ("self", True),
        ("config", True),
        ("Ünïcode", True),
        ("from", False),
        ("class", False),
        ("None", False),
        ("_input", False),
        ("__dunder__", False),
        ("model_config", False),
        ("model_name", False),
        ("json", False),
        ("schema", False),
        ("copy", False),
        ("validate", False),
        ("register", False),
        ("mro", False),
        ("a.b", False),
        ("1st", False),
        ("", False),
        (5, False),
        (None, False),
    ],
)
def test_declarable_field(name: Any, expected: bool) -> None:
    assert declarable_field(name) is expected


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=12))
def test_declarable_names_build_a_pydantic_model_without_warnings(name: str) -> None:
    from pydantic import create_model

    if declarable_field(name):
        model = create_model("M", **{name: (int, ...)})  # warnings are errors here
        assert list(model.model_fields) == [name]


# --- quarantine --------------------------------------------------------------------------


def test_bind_contributions_quarantines_and_binds_the_rest() -> None:
    toolset = Toolset()
    good = ToolContribution("good", "d", {"type": "object"}, _invoke)
    remote = ToolContribution(
        "remote", "d", {"properties": {"a": {"$ref": "https://x.test/a.json"}}}, _invoke
    )
    typo = ToolContribution("typo", "d", {"properties": {"n": {"type": "integr"}}}, _invoke)
    bad_name = ToolContribution("bad name!", "d", {"type": "object"}, _invoke)
    also_good = ToolContribution("also_good", "d", {}, _invoke)
    added = bind_contributions(
        toolset, [good, remote, typo, bad_name, also_good], owner="plugin:demo"
    )
    assert [tool.name for tool in added] == ["good", "also_good"]
    assert toolset.names() == ["also_good", "good"]
    records = [(q.name, q.field, q.owner) for q in toolset.quarantined]
    assert records == [
        ("remote", "input_schema.properties.a.$ref", "plugin:demo"),
        ("typo", "input_schema.properties.n.type", "plugin:demo"),
        ("bad name!", "name", "plugin:demo"),
    ]
    assert toolset.quarantined[0].rule.startswith("remote $ref 'https://x.test/a.json' is refused")
    listing = _listing(toolset.seal())
    assert [item["name"] for item in listing["quarantined"]] == ["remote", "typo", "bad name!"]


class BrokenMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("plugin schema cannot be read")

    def __len__(self) -> int:
        return 1


def test_a_declaration_that_breaks_binding_is_quarantined_alone() -> None:
    toolset = Toolset()
    broken = ToolContribution("broken", "d", BrokenMapping(), _invoke)
    good = ToolContribution("good", "d", {"type": "object"}, _invoke)
    bind_contributions(toolset, [broken, good], owner="plugin:x")
    assert toolset.names() == ["good"]
    assert [q.to_json() for q in toolset.quarantined] == [
        {
            "name": "broken",
            "field": "declaration",
            "rule": "binding raised builtins.RuntimeError: plugin schema cannot be read",
            "owner": "plugin:x",
        }
    ]


def test_bind_contributions_applies_limits_per_call() -> None:
    toolset = Toolset()
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50)}}
    bind_contributions(
        toolset,
        [ToolContribution("wide", "d", wide, _invoke)],
        owner="x",
        limits=SchemaLimits(max_bytes=100),
    )
    assert toolset.names() == []
    size = len(toolproof.canonical_json(wide))
    assert size == 1222
    assert toolset.quarantined[0].rule.startswith(
        f"schema size {size} bytes exceeds the limit of 100"
    )


@pytest.mark.parametrize(
    ("overrides", "field", "rule"),
    [
        ({"description": 5}, "description", "Input should be a valid string"),
        ({"version": 3}, "version", "Input should be a valid string"),
        (
            {"input_schema": None},
            "input_schema",
            "must be a JSON Schema object (a JSON object), not NoneType",
        ),
    ],
)
def test_malformed_contribution_fields_are_refused_by_name(
    overrides: dict[str, Any], field: str, rule: str
) -> None:
    fields: dict[str, Any] = {"name": "t", "description": "d", "input_schema": {}}
    fields.update(overrides)
    with pytest.raises(ToolBindError) as info:
        bind_contribution(ToolContribution(invoke=_invoke, **fields))
    assert (info.value.fields["field"], info.value.fields["rule"]) == (field, rule)


def test_a_missing_description_binds_as_empty() -> None:
    contribution = ToolContribution("t", None, {}, _invoke)  # type: ignore[arg-type]
    assert bind_contribution(contribution).spec.description == ""


def _int64_tool(maximum: int) -> Any:
    async def invoke(arguments: dict[str, Any]) -> Any:
        return {"id": arguments["id"] + 1}

    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": -(2**63), "maximum": maximum}},
        "required": ["id"],
    }
    return bind_contribution(ToolContribution("ids", "By id.", schema, invoke))


def test_int64_bounds_bind_validate_exactly_and_fingerprint_distinctly() -> None:
    # issue 12 item 15: "maximum": 9223372036854775807 quarantined the tool before
    tool = _int64_tool(2**63 - 1)
    assert asyncio.run(tool.call({"id": 2**63 - 2})).value == {"id": 2**63 - 1}
    refused = asyncio.run(tool.call({"id": 2**63}))
    assert refused.failure is not None
    assert refused.failure.message == (
        "invalid arguments for tool 'ids': argument 'id': 9223372036854775808 is greater than "
        "the maximum of 9223372036854775807"
    )
    fingerprint = tool.descriptor().fingerprint
    assert _int64_tool(2**63 - 1).descriptor().fingerprint == fingerprint  # stable
    assert _int64_tool(2**63).descriptor().fingerprint != fingerprint  # 2**63 - 1 != 2**63
    spec_bytes = toolproof.canonical_json(tool.spec.model_dump(mode="json"))
    assert b'"maximum":9223372036854775807' in spec_bytes
