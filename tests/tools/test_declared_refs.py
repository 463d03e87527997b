"""Declared schemas: local refs, remote refusals, limits, bombs (tools/refs.py, limits.py)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from work_support import schema_work

from toolproof import SchemaLimits, ToolBindError, ToolContribution, bind_contribution
from toolproof.schema.expansion import expansion_size, path_expansion
from toolproof.schema.limits import MAX_REF_EXPANSION, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH
from toolproof.schema.refs import RefWalker, resolve_uri
from toolproof.schema.validation import compile_validator


async def _invoke(arguments: dict[str, Any]) -> Any:
    return "ok"


def _bind(schema: Any, limits: SchemaLimits | None = None) -> Any:
    return bind_contribution(ToolContribution("t", "A tool.", schema, _invoke), limits=limits)


def _accepts(schema: dict[str, Any], arguments: dict[str, Any]) -> bool:
    return asyncio.run(_bind(schema).call(arguments)).ok


def _refusal(schema: Any, limits: SchemaLimits | None = None) -> ToolBindError:
    with pytest.raises(ToolBindError) as info:
        _bind(schema, limits)
    return info.value


@pytest.mark.parametrize(
    ("base", "reference", "expected"),
    [
        # RFC 3986 section 5.4.1 normal examples
        ("http://a/b/c/d;p?q", "g", "http://a/b/c/g"),
        ("http://a/b/c/d;p?q", "./g", "http://a/b/c/g"),
        ("http://a/b/c/d;p?q", "/g", "http://a/g"),
        ("http://a/b/c/d;p?q", "//g", "http://g"),
        ("http://a/b/c/d;p?q", "?y", "http://a/b/c/d;p?y"),
        ("http://a/b/c/d;p?q", "#s", "http://a/b/c/d;p?q#s"),
        ("http://a/b/c/d;p?q", "", "http://a/b/c/d;p?q"),
        ("http://a/b/c/d;p?q", "../..", "http://a/"),
        ("http://a/b/c/d;p?q", "../../g", "http://a/g"),
        ("urn:example:root", "#/$defs/A", "urn:example:root#/$defs/A"),
        ("urn:example:root", "urn:other:x#frag", "urn:other:x#frag"),
    ],
)
def test_resolve_uri_follows_rfc_3986(base: str, reference: str, expected: str) -> None:
    assert resolve_uri(base, reference) == expected


INT = {"type": "integer"}
# (property schema, $defs, an accepted value, a refused value)
CHAIN = {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/C"}, "C": INT}
LOCAL = [
    ({"$ref": "#/$defs/N"}, {"N": {"type": "integer"}}, 1, "x"),
    ({"$ref": "#/definitions/N"}, None, 1, "x"),
    ({"$ref": "#/$defs/a~1b"}, {"a/b": {"type": "integer"}}, 1, "x"),
    ({"$ref": "#/$defs/x~0y"}, {"x~y": {"type": "integer"}}, 1, "x"),
    ({"$ref": "#/$defs/per%25cent"}, {"per%cent": {"type": "integer"}}, 1, "x"),
    ({"$ref": "#num"}, {"N": {"$anchor": "num", "type": "integer"}}, 1, "x"),
    ({"$ref": "urn:ex:num"}, {"N": {"$id": "urn:ex:num", "type": "integer"}}, 1, "x"),
    ({"$ref": "p.json#/$defs/i"}, {"P": {"$id": "p.json", "$defs": {"i": INT}}}, 1, "x"),
    ({"$ref": "#/$defs/A"}, CHAIN, 1, "x"),
]  # fmt: skip


@pytest.mark.parametrize(("prop", "defs", "good", "bad"), LOCAL)
def test_local_references_resolve(prop: dict[str, Any], defs: Any, good: Any, bad: Any) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"v": prop}, "required": ["v"]}
    if defs is None:
        schema["definitions"] = {"N": {"type": "integer"}}
    else:
        schema["$defs"] = defs
    assert _accepts(schema, {"v": good})
    assert not _accepts(schema, {"v": bad})


def test_embedded_resource_resolves_fragments_against_its_own_id() -> None:
    schema = {
        "type": "object",
        "properties": {
            "color": {
                "$id": "urn:example:color",
                "$defs": {"C": {"enum": ["red"]}},
                "$ref": "#/$defs/C",
            }
        },
    }
    assert _accepts(schema, {"color": "red"})
    assert not _accepts(schema, {"color": "blue"})


def test_recursive_schemas_bind_and_validate_deeply() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
    }
    deep: dict[str, Any] = {"v": 0}
    for index in range(50):
        deep = {"v": index, "kids": [deep]}
    assert _accepts(schema, {"root": deep})
    deep["kids"][0]["v"] = "x"
    assert not _accepts(schema, {"root": deep})


@pytest.mark.parametrize(
    "reference",
    [
        "http://example.com/schema.json",
        "https://example.com/schema.json#/$defs/A",
        "file:///etc/passwd",
        "urn:example:elsewhere",
        "other.json",
        "../up.json#/x",
        "//host/path",
    ],
)
def test_remote_references_are_refused_at_bind_time(reference: str) -> None:
    error = _refusal({"type": "object", "properties": {"a": {"$ref": reference}}})
    assert error.fields["field"] == "input_schema.properties.a.$ref"
    assert error.fields["rule"].startswith(f"remote $ref {reference!r} is refused")
    assert str(error).startswith("cannot bind tool 't': input_schema.properties.a.$ref: ")


def test_binding_never_opens_a_connection_or_reads_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("binding tried to connect")

    monkeypatch.setattr(socket.socket, "connect", forbidden)
    for schema in (
        {"$ref": "http://127.0.0.1:9/x.json"},
        {"allOf": [{"$ref": "file:///etc/hostname"}]},
        {"$schema": "http://127.0.0.1:9/meta", "type": "object"},
    ):
        _refusal(schema)


@pytest.mark.parametrize(
    ("reference", "rule"),
    [
        (
            "#/$defs/Missing",
            "$ref '#/$defs/Missing' does not resolve: JSON Pointer '/$defs/Missing'",
        ),
        ("#/properties/nope", "$ref '#/properties/nope' does not resolve: JSON Pointer"),
        ("#missing_anchor", "$ref '#missing_anchor' does not resolve: no anchor 'missing_anchor'"),
    ],
)
def test_unresolvable_local_references_are_refused(reference: str, rule: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": reference}}, "$defs": {"P": {}}}
    error = _refusal(schema)
    assert error.fields["field"] == "input_schema.properties.a.$ref"
    assert error.fields["rule"].startswith(rule)


def test_unknown_dialect_is_refused() -> None:
    error = _refusal({"$schema": "https://example.com/my-meta", "type": "object"})
    assert error.fields["field"] == "input_schema.$schema"
    assert error.fields["rule"].startswith("unknown dialect 'https://example.com/my-meta'")


def _fanout(keyword: str, levels: int = 9, width: int = 10) -> dict[str, Any]:
    defs: dict[str, Any] = {"L0": {"type": "string"}}
    for level in range(1, levels + 1):
        refs = [{"$ref": f"#/$defs/L{level - 1}"} for _ in range(width)]
        if keyword == "allOf":
            defs[f"L{level}"] = {"allOf": refs}
        else:
            defs[f"L{level}"] = {"properties": {f"p{i}": ref for i, ref in enumerate(refs)}}
    return {"type": "object", "properties": {"v": {"$ref": f"#/$defs/L{levels}"}}, "$defs": defs}


@pytest.mark.parametrize("keyword", ["allOf", "properties"])
def test_reference_bombs_are_refused_fast_naming_the_limit(keyword: str) -> None:
    with schema_work() as work:
        error = _refusal(_fanout(keyword))  # 10**9 subschemas after expansion
    # refused uncompiled, with work bounded by the limit rather than the expansion
    assert work["compiled"] == 0
    assert 0 < work["lookups"] <= MAX_REF_EXPANSION
    assert error.fields["field"] == "input_schema.properties.v.$ref"
    assert error.fields["rule"].startswith(
        f"reference expansion exceeds the limit of {MAX_REF_EXPANSION} subschemas"
    )


def _expansion(schema: dict[str, Any]) -> int:
    walker = RefWalker(schema, tool="t", field="input_schema", draft=2020)
    walker.index()
    return expansion_size(walker, 10**6).size


def test_expansion_inlines_non_recursive_targets() -> None:
    three = [{"$ref": "#/$defs/L1"}] * 3
    schema = {
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/L2"}},
        "$defs": {
            "L0": {"type": "string"},
            "L1": {"allOf": [{"$ref": "#/$defs/L0"}] * 3},
            "L2": {"allOf": three},
        },
    }
    # L0 = 1, L1 = 1 + 3 * (1 + L0) = 7, L2 = 1 + 3 * (1 + L1) = 25, v = 1 + L2 = 26,
    # root = 1 + v + L0 + L1 + L2 = 60
    assert _expansion(json.loads(json.dumps(schema))) == 60


def test_mutual_recursion_counts_a_recursive_target_once() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {"properties": {"b": {"$ref": "#/$defs/B"}, "a": {"$ref": "#/$defs/A"}}},
            "B": {"properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}}},
        },
    }
    # p = 1 + 1, A = B = 1 + 2 * (1 + 1), root = 1 + p + A + B = 13
    assert _expansion(schema) == 13
    _bind(schema, SchemaLimits(max_expansion=13))
    error = _refusal(schema, SchemaLimits(max_expansion=12))
    assert error.fields["field"] == "input_schema"
    assert error.fields["rule"].startswith("reference expansion exceeds the limit of 12 subschemas")


def test_many_mutually_recursive_definitions_bind_fast() -> None:
    # Every definition references every other: a path-by-path expansion explodes
    # (k! paths), the compiler does not (it compiles each recursive target once).
    k = 8
    defs = {
        f"D{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/$defs/D{j}"} for j in range(k)},
        }
        for i in range(k)
    }
    schema = {"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs}
    with schema_work() as work:
        assert _expansion(schema) == 1 + 2 + k * (1 + 2 * k)
        assert _accepts(schema, {"root": {"p1": {"p2": {}}}})
        assert not _accepts(schema, {"root": {"p1": {"p2": 5}}})
    # two binds, two compiles; a path-by-path walk would look up k! = 40,320 references
    assert work["compiled"] == 2
    assert 0 < work["lookups"] < math.factorial(k)


def test_depth_limit() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):  # two JSON levels per nested property
        schema = {"type": "object", "properties": {"x": schema}}
    error = _refusal(schema)
    assert error.fields["field"] == "input_schema"
    assert error.fields["rule"].startswith(
        f"nesting depth exceeds the limit of {MAX_SCHEMA_DEPTH} levels"
    )
    _bind(schema, SchemaLimits(max_depth=100))


def test_very_deep_schema_is_refused_fast_without_recursion_errors() -> None:
    schema: dict[str, Any] = {}
    for _ in range(900):
        schema = {"items": schema}
    with schema_work() as work:
        error = _refusal(schema)
    assert work == {}  # refused before any reference is followed or anything compiled
    assert error.fields["rule"].startswith("nesting depth exceeds the limit of 64 levels")


def test_size_limit() -> None:
    schema = {"type": "object", "enum": ["x" * 1000] * 1100}
    with schema_work() as work:
        error = _refusal(schema)
    assert work == {}  # refused before any reference is followed or anything compiled
    assert error.fields["rule"].startswith(
        f"schema size 1103326 bytes exceeds the limit of {MAX_SCHEMA_BYTES} bytes"
    )
    _bind(schema, SchemaLimits(max_bytes=2_000_000))


def test_limits_must_be_positive_integers() -> None:
    with pytest.raises(ValueError, match=r"SchemaLimits\.max_depth must be a positive integer"):
        SchemaLimits(max_depth=0)


@pytest.mark.parametrize("reference", ["file:///etc/hostname", "http://127.0.0.1:9/s.json"])
def test_the_validator_compiler_itself_never_fetches(reference: str) -> None:
    # jsonschema-rs reads file: and http: references by default; every Tool compiles
    # through compile_validator, which refuses them (a schema-level backstop).
    with pytest.raises(ValueError, match="is refused: nothing is fetched"):
        compile_validator({"$ref": reference})


@pytest.mark.parametrize(
    ("dialect", "definition"),
    [
        ("http://json-schema.org/draft-07/schema#", {"$id": "#num", "type": "integer"}),
        ("http://json-schema.org/draft-06/schema#", {"$id": "#num", "type": "integer"}),
        ("http://json-schema.org/draft-04/schema#", {"id": "#num", "type": "integer"}),
    ],
)
def test_older_drafts_plain_name_ids_are_anchors(dialect: str, definition: dict[str, Any]) -> None:
    schema = {
        "$schema": dialect,
        "type": "object",
        "properties": {"v": {"$ref": "#num"}},
        "definitions": {"N": definition},
    }
    assert _accepts(schema, {"v": 1})
    assert not _accepts(schema, {"v": "x"})


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(min_value=0, max_value=5), max_size=4), min_size=1, max_size=6)
)
def test_the_path_walk_bounds_the_exact_expansion_from_above(graph: list[list[int]]) -> None:
    # definition i references the definitions graph[i] (indices wrap around)
    k = len(graph)
    defs = {
        f"D{i}": {"allOf": [{"$ref": f"#/$defs/D{j % k}"} for j in targets]}
        for i, targets in enumerate(graph)
    }
    schema = {"properties": {"v": {"$ref": "#/$defs/D0"}}, "$defs": defs}
    walker = RefWalker(schema, tool="t", field="input_schema", draft=2020)
    exact = expansion_size(walker, 10**6).size
    bound = path_expansion(walker, 10**5)
    assert bound is None or bound >= exact
    assert exact <= 10**6
