"""Schema bombs that bypass the expansion count, and the per-call validation bound (issue 12.1).

Each case here bound before and then cost seconds to hours per invalid call (or bound
on a resolution the validator does not use). Now each is refused at bind naming the
tool, the pointer and the rule, or its call is bounded.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from work_support import schema_work

from toolproof import ToolBindError, ToolContribution, bind_contribution
from toolproof.schema.validation import MAX_REGEX_BACKTRACK, compile_validator
from toolproof.tools.tool import MAX_VALIDATION_WORK

_UNIQUE = (
    "is not unique: {other} has it too (rule: every $id, $anchor and $dynamicAnchor must be "
    "unique in the schema, identifiers compared as URIs resolved against 'json-schema:///' "
    "and normalized by RFC 3986 and RFC 8141, since validators disagree on which one a "
    "reference names and the limits must be computed on the validator's resolution)"
)


async def _invoke(arguments: dict[str, Any]) -> Any:
    return "ok"


def _bind(schema: Any) -> Any:
    return bind_contribution(ToolContribution("bomb", "A tool.", schema, _invoke))


def _refusal(schema: Any) -> ToolBindError:
    with schema_work() as work, pytest.raises(ToolBindError) as info:
        _bind(schema)
    assert work["compiled"] == 0  # refused before compiling
    assert info.value.fields["tool"] == "bomb"
    return info.value


def duplicate_id_bomb(*, decoy_first: bool) -> dict[str, Any]:
    """Six levels of ten references, each level's $id also given to a one-node decoy."""
    defs: dict[str, Any] = {}
    for level in range(6):
        real: dict[str, Any] = {"$id": f"urn:bomb:L{level}", "type": "string"}
        if level:
            real = {
                "$id": f"urn:bomb:L{level}",
                "anyOf": [{"$ref": f"urn:bomb:L{level - 1}", "minimum": i} for i in range(10)],
            }
        decoy = {"$id": f"urn:bomb:L{level}", "type": "integer"}
        pair = [(f"d{level}", decoy), (f"r{level}", real)]
        defs.update(pair if decoy_first else reversed(pair))
    return {"type": "object", "properties": {"v": {"$ref": "urn:bomb:L5"}}, "$defs": defs}


@pytest.mark.parametrize("decoy_first", [True, False])
def test_the_duplicate_id_bomb_is_refused_at_bind_naming_both_places(decoy_first: bool) -> None:
    schema = duplicate_id_bomb(decoy_first=decoy_first)
    assert len(json.dumps(schema)) < 2600  # 10**5 applications from 2.5 kB
    error = _refusal(schema)
    first, second = ("d5", "r5") if decoy_first else ("r5", "d5")
    assert error.fields["field"] == f"input_schema.$defs.{first}.$id"
    assert error.fields["rule"] == "$id 'urn:bomb:L5' " + _UNIQUE.format(
        other=f"input_schema.$defs.{second}"
    )


@pytest.mark.parametrize(
    ("defs", "field", "what"),
    [
        (
            {"a": {"$anchor": "x", "type": "string"}, "b": {"$anchor": "x"}},
            "input_schema.$defs.a.$anchor",
            "anchor 'x'",
        ),
        (
            {"a": {"$dynamicAnchor": "x"}, "b": {"$dynamicAnchor": "x"}},
            "input_schema.$defs.a.$dynamicAnchor",
            "anchor 'x'",
        ),
        (
            {"a": {"$anchor": "x"}, "b": {"$dynamicAnchor": "x"}},
            "input_schema.$defs.a.$anchor",
            "anchor 'x'",
        ),
        (
            {"a": {"$id": "json-schema:///"}},  # the validator's default base: the root
            "input_schema.$defs.a.$id",
            "$id 'json-schema:///'",
        ),
    ],
)
def test_every_non_unique_identifier_is_refused(
    defs: dict[str, Any], field: str, what: str
) -> None:
    schema = {"properties": {"v": {"$ref": "#x"}}, "$defs": defs}
    error = _refusal(schema)
    assert error.fields["field"] == field
    assert error.fields["rule"].startswith(f"{what} is not unique: ")


def test_one_subschema_may_carry_an_anchor_and_a_dynamic_anchor_of_one_name() -> None:
    schema = {
        "properties": {"v": {"$ref": "#x"}},
        "$defs": {"a": {"$anchor": "x", "$dynamicAnchor": "x", "type": "string"}},
    }
    tool = _bind(schema)
    assert asyncio.run(tool.call({"v": "s"})).ok
    assert not asyncio.run(tool.call({"v": 1})).ok


def _draft7_bomb(levels: int) -> dict[str, Any]:
    # Up to draft-07 every sibling of $ref is ignored, $id included: "a.json" in n
    # resolves against the root's base (A, the fan-out), not n's own $id (B, one node).
    defs: dict[str, Any] = {
        "n": {"$id": "http://e.com/x/", "$ref": "a.json"},
        "B": {"$id": "http://e.com/x/a.json", "type": "integer"},
        "A": {
            "$id": "http://e.com/a.json",
            "allOf": [{"$ref": f"root.json#/definitions/L{levels}"}],
        },
        "L0": {"type": "string"},
    }
    for level in range(1, levels + 1):
        defs[f"L{level}"] = {"anyOf": [{"$ref": f"#/definitions/L{level - 1}"}] * 10}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "http://e.com/root.json",
        "definitions": defs,
        "properties": {"p": {"$ref": "#/definitions/n"}},
    }


def test_draft_07_resolution_is_the_validators_own() -> None:
    small = _draft7_bomb(1)
    validator = compile_validator(small)
    assert validator.is_valid({"p": "s"}) and not validator.is_valid({"p": 1})  # A, not B
    tool = _bind(small)
    assert asyncio.run(tool.call({"p": "s"})).ok
    assert not asyncio.run(tool.call({"p": 1})).ok
    error = _refusal(_draft7_bomb(5))  # counted on A, as the validator resolves it
    assert error.fields["field"] == "input_schema.definitions.n.$ref"
    assert error.fields["rule"].startswith("reference expansion exceeds the limit of 10000")


def test_an_embedded_resource_of_another_dialect_is_refused() -> None:
    schema = {
        "properties": {"v": {"$ref": "urn:x"}},
        "$defs": {"x": {"$id": "urn:x", "$schema": "http://json-schema.org/draft-07/schema#"}},
    }
    error = _refusal(schema)
    assert error.fields["field"] == "input_schema.$defs.x.$schema"
    assert error.fields["rule"].startswith(
        "embedded resource declares dialect 'http://json-schema.org/draft-07/schema#' "
        "(rule: one dialect per declaration"
    )


_PER_VALUE = (
    "validating one value of the arguments could apply more than 10000 subschemas (rule: "
    "SchemaLimits.max_expansion, default MAX_REF_EXPANSION, also bounds the subschemas "
    "applied to one value; recursive references that reach a definition along several "
    "paths multiply with the depth of the arguments)"
)


@pytest.mark.parametrize("ref", ["$ref", "$dynamicRef"])
def test_recursion_that_multiplies_with_depth_is_refused(ref: str) -> None:
    # 10 branches back to the root at each level: 10**d applications at depth d, so
    # collecting the errors of {"x": {"x": ... 1}} six deep took 50 s (10**6).
    branches = [{ref: "#node", "minProperties": i} for i in range(10)]
    schema = {
        "$dynamicAnchor": "node",
        "$anchor": "node",
        "type": "object",
        "properties": {"x": {"anyOf": branches}},
    }
    error = _refusal(schema)
    assert error.fields["field"] == "input_schema"
    assert error.fields["rule"] == _PER_VALUE


def test_dynamic_ref_counts_every_dynamic_anchor_it_may_reach() -> None:
    # The static target is tiny; at validation the outermost "$dynamicAnchor": "t" in
    # scope is the root's, which fans out ten ways per level.
    schema = {
        "$dynamicAnchor": "t",
        "type": "object",
        "properties": {
            "x": {"anyOf": [{"$dynamicRef": "urn:leaf#t", "minimum": i} for i in range(10)]}
        },
        "$defs": {"leaf": {"$id": "urn:leaf", "$dynamicAnchor": "t", "type": "integer"}},
    }
    assert _refusal(schema).fields["rule"] == _PER_VALUE


def test_a_cycle_of_in_place_references_is_refused() -> None:
    schema = {
        "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}},
        "properties": {"q": {"$ref": "#/$defs/a"}},
    }
    error = _refusal(schema)
    assert error.fields["field"] == "input_schema.properties.q.$ref"
    assert error.fields["rule"].startswith(
        "a cycle of in-place references never reaches a child value (rule: every cycle of "
        "$ref/$dynamicRef must pass through a keyword that applies to a member or element"
    )


def test_recursive_schemas_that_do_not_multiply_keep_binding_with_a_small_bound() -> None:
    value = {
        "$defs": {
            "json": {
                "anyOf": [
                    {"type": ["string", "number", "boolean", "null"]},
                    {"type": "array", "items": {"$ref": "#/$defs/json"}},
                    {"type": "object", "additionalProperties": {"$ref": "#/$defs/json"}},
                ]
            }
        },
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/json"}},
    }
    tool = _bind(value)
    assert tool._fanout == 5  # at v: the property, its $ref, json and its 3 branches
    deep: Any = 1
    for _ in range(120):  # 240 levels, under MAX_ARGUMENT_DEPTH
        deep = {"k": [deep]}
    assert asyncio.run(tool.call({"v": deep})).ok


def test_a_call_whose_validation_would_exceed_the_work_limit_is_refused_unvalidated() -> None:
    # 5041 applications per element: legal (under 10**4), so the bound is per call
    level = {"allOf": [{"minimum": i} for i in range(70)]}
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/L"}] * 70}}},
        "$defs": {"L": level},
    }
    tool = _bind(schema)
    assert tool._fanout == 5041  # items, 70 refs, 70 L, 70 x 70 minimum
    assert asyncio.run(tool.call({"xs": [100] * 10})).ok
    result = asyncio.run(tool.call({"xs": [100] * 300}))
    assert result.failure is not None and result.failure.kind == "invalid_arguments"
    assert result.failure.message == (
        f"invalid arguments for tool 'bomb': validating them could apply 1522382 subschemas, "
        f"over the limit of {MAX_VALIDATION_WORK} (rule: MAX_VALIDATION_WORK; the schema "
        "applies up to 5041 subschemas to each of the 302 values)"
    )


def test_a_backtracking_pattern_is_bounded_per_match() -> None:
    # fancy-regex (look-around, back-references) backtracks. At its default limit of
    # 10**6 steps, "a" * 17 + "!" fails to match after 0.14 s, so under "not" the item
    # is valid and validation goes on: 100 such items took 14 s for one call.
    schema = {
        "type": "object",
        "properties": {"s": {"type": "array", "items": {"not": {"pattern": r"^(a|a)*\1$"}}}},
    }
    tool = _bind(schema)
    start = time.perf_counter()
    result = asyncio.run(tool.call({"s": ["a" * 17 + "!"] * 100}))
    # one-sided and generous: about 0.2 s bounded, 14 s at fancy-regex's default limit
    assert time.perf_counter() - start < 10.0
    assert result.failure is not None and result.failure.kind == "invalid_arguments"
    assert result.failure.message == (
        "invalid arguments for tool 'bomb': Error executing regex: Max limit for "
        "backtracking count exceeded"  # jsonschema-rs gives this error no instance path
    )
    assert asyncio.run(tool.call({"s": ["a!", "b"]})).ok  # short inputs match as before
    assert MAX_REGEX_BACKTRACK == 10_000
