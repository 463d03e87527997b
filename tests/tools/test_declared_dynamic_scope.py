"""A dynamic reference counts the one subschema it can reach in scope (issue 30 item 19).

The per-value bound once counted every ``$dynamicAnchor`` of a reference's name
anywhere in the schema, each as an extra application, so a schema that extends its
root through ``$dynamicRef`` (the shape of the JSON-Schema-Test-Suite's
"initially resolves to a schema with a matching $dynamicAnchor" cases, three tests of
``draft2020-12/dynamicRef.json``) doubled its count at every level of the arguments
and was refused at bind. A ``$dynamicRef`` applies one subschema per evaluation: the
dynamic anchor of its name in the outermost resource in dynamic scope, or its static
target when that has no dynamic anchor of the name (the bookend rule).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolproof import ToolBindError, ToolContribution, bind_contribution
from toolproof.schema import fanout
from toolproof.schema.validation import compile_validator


async def _invoke(arguments: dict[str, Any]) -> Any:
    return "ok"


def _bind(schema: dict[str, Any]) -> Any:
    return bind_contribution(ToolContribution("tree", "A tool.", schema, _invoke))


def _tree(anchor_key: str) -> dict[str, Any]:
    """A root that extends ``base``; ``child.next`` refers back to ``base#node`` dynamically."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/tree/root",
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {"name": {"const": "ok"}},
        "$ref": "base",
        "$defs": {
            "base": {
                "$id": "base",
                anchor_key: "node",
                "type": "object",
                "properties": {"child": {"$ref": "child"}},
            },
            "child": {
                "$id": "child",
                "type": "object",
                "properties": {"next": {"$dynamicRef": "base#node"}},
            },
        },
    }


GOOD = {"name": "ok", "child": {"next": {"name": "ok"}}}
BAD = {"name": "ok", "child": {"next": {"name": "bad"}}}


@pytest.mark.parametrize(
    ("anchor_key", "bad_is_valid", "fanout"),
    [
        # base has a dynamic anchor "node": the outermost in scope is the root's, so
        # "next" is checked against the root (name must be "ok"); at "next" the
        # reference, the root and base apply: 3
        ("$dynamicAnchor", False, 3),
        # base has a plain $anchor: the bookend rule makes the reference a plain $ref
        # to base, which asks nothing of "name"
        ("$anchor", True, 2),
    ],
)
def test_a_dynamic_reference_counts_the_anchor_in_scope(
    anchor_key: str, bad_is_valid: bool, fanout: int
) -> None:
    schema = _tree(anchor_key)
    validator = compile_validator(schema)
    assert validator.is_valid(GOOD) and validator.is_valid(BAD) is bad_is_valid
    tool = _bind(schema)  # was refused: more than 10000 subschemas per value
    assert tool._fanout == fanout
    assert asyncio.run(tool.call(GOOD)).ok
    assert asyncio.run(tool.call(BAD)).ok is bad_is_valid
    deep: dict[str, Any] = {"name": "ok"}
    for _ in range(100):  # 200 levels of nesting: the count does not grow with depth
        deep = {"name": "ok", "child": {"next": deep}}
    assert asyncio.run(tool.call(deep)).ok


def test_a_recursive_reference_counts_the_anchor_in_scope() -> None:
    # draft 2019-09's $recursiveRef, the same shape
    schema = {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$id": "https://example.com/rec/root",
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"name": {"const": "ok"}},
        "$ref": "base",
        "$defs": {
            "base": {
                "$id": "base",
                "$recursiveAnchor": True,
                "type": "object",
                "properties": {"child": {"$recursiveRef": "#"}},
            }
        },
    }
    tool = _bind(schema)  # was refused too
    assert tool._fanout == 3
    assert asyncio.run(tool.call({"name": "ok", "child": {"name": "ok"}})).ok
    assert not asyncio.run(tool.call({"name": "ok", "child": {"name": "bad"}})).ok


def test_where_scopes_differ_both_choices_are_counted() -> None:
    # Walking into an embedded resource: the specification's scope has the root's anchor
    # outermost, jsonschema-rs's has only the embedded one (it takes that). Both count.
    schema = {
        "$id": "https://example.com/walk/root",
        "$dynamicAnchor": "n",
        "type": ["object", "integer"],
        "properties": {
            "x": {
                "$id": "inner",
                "$dynamicAnchor": "n",
                "type": ["object", "string"],
                "properties": {"y": {"$dynamicRef": "#n"}},
            }
        },
    }
    tool = _bind(schema)
    assert tool._fanout == 3  # at y: the reference, the root and inner
    assert asyncio.run(tool.call({"x": {"y": "s"}})).ok  # the validator's choice: inner
    assert not asyncio.run(tool.call({"x": {"y": 1}})).ok


def test_the_scoped_graph_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "MAX_NODES", 5)
    with pytest.raises(ToolBindError) as info:
        _bind(_tree("$dynamicAnchor"))
    assert info.value.fields["field"] == "input_schema"
    assert info.value.fields["rule"] == (
        "the references are too intricate to bound the work of validating one value (rule: "
        "at most 5 subschemas in their dynamic scopes are explored; simplify the "
        "$ref/$dynamicRef structure)"
    )
