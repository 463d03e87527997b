"""Identifiers are compared as the validator compares them (issue 30 item 1, rule a).

The limit walker once treated ``URN:L`` and ``urn:L``, ``%4C`` and ``L``, host case, an
explicit default port and the validator's default base as different resources while
jsonschema-rs resolves each pair as one: a 2 kB schema bound in a millisecond and one
invalid call then cost a minute and 2.8 GB. Identifiers are now resolved against
``json-schema:///`` and normalized (RFC 3986, RFC 8141) before they are compared.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from work_support import schema_work

from toolproof import ToolBindError, ToolContribution, bind_contribution
from toolproof.schema.uris import normalize_uri, resolve_uri
from toolproof.schema.validation import compile_validator


async def _invoke(arguments: dict[str, Any]) -> Any:
    return "ok"


def _bind(schema: Any) -> Any:
    return bind_contribution(ToolContribution("bomb", "A tool.", schema, _invoke))


@pytest.mark.parametrize(
    ("uri", "normal"),
    [
        ("URN:bomb:L5", "urn:bomb:L5"),
        ("urn:bomb:%4C5", "urn:bomb:L5"),
        ("urn:EX:%3a%7e", "urn:ex:%3A~"),  # RFC 8141: the NID in lower case, the NSS kept
        ("urn:ex:a?+r?=q#f", "urn:ex:a"),  # RFC 8141 section 3: r-, q-, f-components ignored
        ("HTTP://Host:80/x", "http://host/x"),
        ("https://H:443", "https://h/"),  # default port dropped, empty path is "/"
        ("http://h:/a/./b/../c", "http://h/a/c"),  # empty port, dot segments
        ("http://h:8080/%7e%2f", "http://h:8080/~%2F"),  # reserved %2F stays encoded
        ("http://[::1]:80/x", "http://[::1]/x"),
        ("http://h/x?Q", "http://h/x?Q"),  # the query is case-sensitive
        ("json-schema:///", "json-schema:///"),
        ("urn:é", "urn:%C3%A9"),  # RFC 3987 3.1
    ],
)
def test_identifiers_are_normalized_by_rfc_3986_and_8141(uri: str, normal: str) -> None:
    assert normalize_uri(uri) == normal


SPELLINGS: dict[str, tuple[Callable[[int], str], Callable[[int], str]]] = {
    "scheme case": (lambda k: f"urn:bomb:L{k}", lambda k: f"URN:bomb:L{k}"),
    "percent-encoding": (lambda k: f"urn:bomb:L{k}", lambda k: f"urn:bomb:%4C{k}"),
    "host and port": (lambda k: f"http://host/L{k}", lambda k: f"HTTP://Host:80/L{k}"),
    "default base": (lambda k: f"json-schema:///L{k}", lambda k: f"L{k}"),
}


def spelling_bomb(kind: str, levels: int, *, decoy_first: bool) -> dict[str, Any]:
    """Levels of ten references written in one spelling; a one-node decoy holds the other.

    The walker used to resolve every reference to the decoy (the spelling it is written
    in) and count a few nodes; the validator resolves both spellings to one resource,
    the fan-out, and applies 10**(levels - 1) subschemas to one value.
    """
    real_id, decoy_id = SPELLINGS[kind]
    defs: dict[str, Any] = {}
    for level in range(levels):
        real: dict[str, Any] = {"$id": real_id(level), "type": "string"}
        if level:
            refs = [{"$ref": decoy_id(level - 1), "minimum": i} for i in range(10)]
            real = {"$id": real_id(level), "anyOf": refs}
        decoy = {"$id": decoy_id(level), "type": "integer"}
        pair = [(f"d{level}", decoy), (f"r{level}", real)]
        defs.update(pair if decoy_first else reversed(pair))
    return {"type": "object", "properties": {"v": {"$ref": decoy_id(levels - 1)}}, "$defs": defs}


@pytest.mark.parametrize("decoy_first", [True, False])
@pytest.mark.parametrize("kind", sorted(SPELLINGS))
def test_the_uri_spelling_bomb_is_refused_at_bind(kind: str, decoy_first: bool) -> None:
    small = spelling_bomb(kind, 2, decoy_first=decoy_first)
    validator = compile_validator(small)  # the validator's resolution: the fan-out
    assert validator.is_valid({"v": "s"}) and not validator.is_valid({"v": 1})
    schema = spelling_bomb(kind, 7, decoy_first=decoy_first)
    assert len(json.dumps(schema)) < 3500  # 10**6 applications per value
    with schema_work() as work, pytest.raises(ToolBindError) as info:
        _bind(schema)
    assert work["compiled"] == 0  # refused before compiling
    real_id, decoy_id = SPELLINGS[kind]
    second, first = ("d6", "r6") if decoy_first else ("r6", "d6")
    ident = decoy_id(6) if decoy_first else real_id(6)
    normal = normalize_uri(resolve_uri("json-schema:///", ident))
    what = f"$id {ident!r}" + (f" (resolved and normalized: {normal!r})" if normal != ident else "")
    error = info.value
    assert error.fields["tool"] == "bomb"
    assert error.fields["field"] == f"input_schema.$defs.{second}.$id"
    assert error.fields["rule"] == (
        f"{what} is not unique: input_schema.$defs.{first} has it too (rule: every $id, "
        "$anchor and $dynamicAnchor must be unique in the schema, identifiers compared as "
        "URIs resolved against 'json-schema:///' and normalized by RFC 3986 and RFC 8141, "
        "since validators disagree on which one a reference names and the limits must be "
        "computed on the validator's resolution)"
    )


@pytest.mark.parametrize(
    ("ident", "reference"),
    [
        ("urn:ex:A", "URN:ex:A"),
        ("urn:ex:A", "urn:ex:%41"),
        ("http://host/a/b", "HTTP://HOST:80/a/./c/../b"),
        ("https://host/x", "https://host:443/x"),
        ("json-schema:///part", "part"),
    ],
)
def test_a_reference_in_another_spelling_resolves_as_the_validator_resolves_it(
    ident: str, reference: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"$ref": reference}},
        "$defs": {"a": {"$id": ident, "type": "string"}},
    }
    assert compile_validator(schema).is_valid({"v": "s"})
    tool = _bind(schema)  # was refused as a remote reference
    assert asyncio.run(tool.call({"v": "s"})).ok
    assert not asyncio.run(tool.call({"v": 1})).ok


def test_the_validators_default_base_names_the_root() -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"$ref": "JSON-SCHEMA:///#/$defs/a"}},
        "$defs": {"a": {"type": "string"}},
    }
    tool = _bind(schema)
    assert asyncio.run(tool.call({"v": "s"})).ok
    assert not asyncio.run(tool.call({"v": 1})).ok
