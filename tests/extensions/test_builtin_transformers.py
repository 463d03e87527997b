"""The ``args`` and ``project`` transformers."""

from __future__ import annotations

from typing import Any

import pytest
from ext_support import SCHEMA, Recorder, elements, make_tool, refusal, run

from toolproof import Tool
from toolproof.extensions import build_combo

WIDE = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for"},
        "limit": {"type": "integer", "minimum": 1},
        "lang": {"type": "string"},
    },
    "required": ["query", "limit"],
    "additionalProperties": False,
}


def args_variant(config: dict[str, Any], body: Recorder | None = None, **kw: Any) -> Tool:
    base = make_tool("search", body=body or Recorder("ok"), schema=kw.pop("schema", WIDE), **kw)
    return build_combo(base, elements(("args", config)))[-1][1]


def test_rename_hide_default_describe() -> None:
    body = Recorder("one", "two")
    tool = args_variant(
        {
            "rename": {"query": "q"},
            "hide": {"lang": "en"},
            "defaults": {"limit": 5},
            "describe": {"limit": "how many results"},
            "description": "Search in English.",
        },
        body,
    )
    assert tool.spec.description == "Search in English."
    assert tool.spec.input_schema == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": "what to look for"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "how many results",
                "default": 5,
            },
        },
        "required": ["q"],
        "additionalProperties": False,
    }
    assert run(tool.call({"q": "cats"})).value == "one"
    assert run(tool.call({"q": "dogs", "limit": 2})).value == "two"
    assert body.calls == [
        {"query": "cats", "limit": 5, "lang": "en"},
        {"query": "dogs", "limit": 2, "lang": "en"},
    ]
    old_name = run(tool.call({"query": "cats"}))
    assert old_name.failure is not None and old_name.failure.kind == "invalid_arguments"


def test_schema_of_the_base_is_never_mutated() -> None:
    before = {**WIDE, "properties": dict(WIDE["properties"])}
    args_variant({"rename": {"query": "q"}, "describe": {"query": "x"}})
    assert before == WIDE


REFUSALS = {
    "onto-existing": (
        {"rename": {"query": "limit"}},
        "args: renaming 'query' onto existing parameter 'limit' "
        "(rule: a rename never replaces another parameter)",
    ),
    "duplicate-target": (
        {"rename": {"query": "x", "lang": "x"}},
        "args: 'query' and 'lang' are both renamed to 'x'",
    ),
    "unknown": ({"rename": {"nope": "x"}}, "args: rename: tool 'search' has no parameter 'nope'"),
    "hidden-renamed": (
        {"hide": {"lang": "en"}, "rename": {"lang": "l"}},
        "args: parameter 'lang' is both in hide and rename "
        "(rule: a hidden parameter is pinned; it cannot also be presented)",
    ),
    "bad-pin": (
        {"hide": {"limit": 0}},
        "args: pinned value for 'limit' breaks its schema: 0 is less than the minimum of 1",
    ),
    "bad-default": (
        {"defaults": {"limit": "5"}},
        'args: default for \'limit\' breaks its schema: "5" is not of type "integer"',
    ),
    "bad-name": (
        {"rename": {"query": "bad name"}},
        "args: rename 'query' -> 'bad name': not a valid parameter name",
    ),
}


@pytest.mark.parametrize(("config", "rule"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_args_refusals(config: dict[str, Any], rule: str) -> None:
    base = make_tool("search", schema=WIDE)
    assert refusal(base, ("args", config)) == (
        f"cannot apply combo [args] to tool 'search': {rule}"
    )


def test_open_schema_refuses_the_old_names() -> None:
    open_schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = Recorder(1)
    tool = args_variant({"rename": {"a": "x"}}, body, schema=open_schema)
    assert tool.spec.input_schema["propertyNames"] == {"not": {"enum": ["a"]}}
    refused = run(tool.call({"x": 1, "a": 2}))
    assert refused.failure is not None and refused.failure.kind == "invalid_arguments"
    assert run(tool.call({"x": 1, "other": 2})).ok
    assert body.calls == [{"a": 1, "other": 2}]


def test_args_declares_the_inner_output_schema() -> None:
    tool = args_variant({"rename": {"query": "q"}}, output_schema={"type": "string"})
    assert tool.spec.output_schema == {"type": "string"}


def test_project_reshapes_and_declares_its_output() -> None:
    body = Recorder({"items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]})
    base = make_tool(body=body)
    config = {
        "expression": "items[].name",
        "output_schema": {"type": "array", "items": {"type": "string"}},
    }
    [(_, tool)] = build_combo(base, elements(("project", config)))
    assert tool.spec.input_schema == SCHEMA
    assert tool.spec.output_schema == config["output_schema"]
    assert run(tool.call({"a": 1})).value == ["a", "b"]


def test_project_output_schema_is_enforced_and_failures_pass_through() -> None:
    body = Recorder({"n": "x"}, RuntimeError("down"))
    config = {"expression": "n", "output_schema": {"type": "integer"}}
    [(_, tool)] = build_combo(make_tool(body=body), elements(("project", config)))
    broken = run(tool.call({"a": 1}))
    assert broken.failure is not None and broken.failure.message == (
        "tool 'add_project' returned a value that breaks its output schema: /: "
        '"x" is not of type "integer"'
    )
    failed = run(tool.call({"a": 1}))
    assert failed.failure is not None and failed.failure.kind == "tool_error"


def test_project_refuses_a_bad_expression() -> None:
    message = refusal(make_tool(), ("project", {"expression": "items[?"}))
    assert message.startswith(
        "cannot apply combo [project] to tool 'add': project: expression 'items[?' is not valid "
        "JMESPath: "
    )
