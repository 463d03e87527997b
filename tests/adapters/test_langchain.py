"""LangChain adapter: coroutine only, aliased args model, exact delivery (adapters/langchain.py)."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langchain_core.utils.function_calling import convert_to_openai_tool

from toolproof import Tool, ToolCallError, ToolContribution, bind_contribution
from toolproof.adapters.frameworks.langchain import args_model, as_structured_tool

HARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "from": {"type": "string", "description": "Start."},
        "class": {"type": "string"},
        "_input_value": {"type": "string"},
        "__dunder__": {"type": "integer"},
        "model_config": {"type": "object"},
        "model_name": {"type": "string"},
        "json": {"type": ["string", "null"]},
        "config": {"type": "object", "properties": {"mode": {"type": "string"}}},
        "run_manager": {"type": "string"},
        "callbacks": {"type": "array"},
        "arguments": {"type": "object"},
        "a.b": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "mode": {"enum": ["fast", "slow", None]},
    },
    "required": ["from"],
}

HARD_CALLS: list[dict[str, Any]] = [
    {"from": "x"},
    {"from": "x", "json": None, "mode": None},
    {"from": "x", "class": "c", "_input_value": "u", "__dunder__": 1, "model_name": "m"},
    {"from": "x", "model_config": {"k": [1, None]}, "config": {"mode": "m"}},
    {"from": "x", "run_manager": "rm", "callbacks": [1], "arguments": {"a": 1}, "a.b": "dot"},
    {"from": "x", "limit": 3, "undeclared": {"nested": True}},
]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.calls.append(copy.deepcopy(arguments))
        return {"echo": arguments.get("from")}


def _hard_tool() -> tuple[Tool, Recorder]:
    recorder = Recorder()
    return bind_contribution(
        ToolContribution("hard", "Hard names.", HARD_SCHEMA, recorder)
    ), recorder


@pytest.mark.parametrize("arguments", HARD_CALLS)
def test_langchain_and_direct_calls_deliver_the_same_object(arguments: dict[str, Any]) -> None:
    tool, recorder = _hard_tool()
    structured = as_structured_tool(tool)

    async def run() -> list[Any]:
        direct = await tool.call(copy.deepcopy(arguments))
        plain = await structured.ainvoke(copy.deepcopy(arguments))
        call = {"type": "tool_call", "name": "hard", "id": "c1", "args": copy.deepcopy(arguments)}
        message = await structured.ainvoke(call)
        return [direct.value, plain, message]

    direct, plain, message = asyncio.run(run())
    assert recorder.calls == [arguments, arguments, arguments]
    assert direct == plain == {"echo": "x"}
    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.status) == ("c1", "success")


def test_refused_arguments_raise_tool_exception_without_calling_the_body() -> None:
    tool, recorder = _hard_tool()
    structured = as_structured_tool(tool)
    with pytest.raises(ToolException) as info:
        asyncio.run(structured.ainvoke({"from": 5}))
    assert (
        str(info.value)
        == "invalid arguments for tool 'hard': argument 'from': 5 is not of type \"string\""
    )
    assert isinstance(info.value.__cause__, ToolCallError)
    assert recorder.calls == []
    structured.handle_tool_error = True
    message = asyncio.run(
        structured.ainvoke({"type": "tool_call", "name": "hard", "id": "c2", "args": {}})
    )
    assert message.status == "error"
    assert message.content == "invalid arguments for tool 'hard': \"from\" is a required property"


def test_coroutine_only_no_sync_path() -> None:
    tool, recorder = _hard_tool()
    structured = as_structured_tool(tool)
    assert structured.func is None
    assert structured.coroutine is not None
    with pytest.raises(NotImplementedError, match="does not support sync invocation"):
        structured.invoke({"from": "x"})
    assert recorder.calls == []


def test_model_sees_the_declared_schema() -> None:
    tool, _ = _hard_tool()
    structured = as_structured_tool(tool)
    assert isinstance(structured, BaseTool)
    function = convert_to_openai_tool(structured)["function"]
    assert function["name"] == "hard"
    assert function["description"] == "Hard names."
    assert function["parameters"]["properties"] == HARD_SCHEMA["properties"]
    assert function["parameters"]["required"] == ["from"]
    assert structured.args == HARD_SCHEMA["properties"]


def test_args_model_aliases_names_python_cannot_hold() -> None:
    tool, _ = _hard_tool()
    model = args_model(tool)
    aliases = {name: field.alias for name, field in model.model_fields.items()}
    assert aliases == {
        "from_": "from",
        "class_": "class",
        "input_value": "_input_value",
        "dunder": "__dunder__",
        "field_model_config": "model_config",
        "field_model_name": "model_name",
        "json_": "json",
        "config_": "config",
        "run_manager_": "run_manager",
        "callbacks_": "callbacks",
        "arguments_": "arguments",
        "a_b": "a.b",
        "limit": None,
        "mode": None,
    }
    instance = model.model_validate({"from": "x", "a.b": "y", "model_config": {}})
    assert instance.model_dump(exclude_unset=True) == {"from": "x", "a.b": "y", "model_config": {}}
    assert model.model_fields["mode"].annotation == Literal["fast", "slow", None] | None
    schema = model.model_json_schema()
    assert list(schema["properties"]) == list(HARD_SCHEMA["properties"])


def test_args_model_of_a_schema_without_properties_is_empty_and_open() -> None:
    recorder = Recorder()
    tool = bind_contribution(ToolContribution("free", "d", {}, recorder))
    assert args_model(tool).model_fields == {}
    structured = as_structured_tool(tool)
    assert asyncio.run(structured.ainvoke({"anything": [1]})) == {"echo": None}
    assert recorder.calls == [{"anything": [1]}]


def test_root_ref_schema_gives_the_referenced_properties() -> None:
    schema = {
        "$ref": "#/$defs/Args",
        "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}},
    }
    tool = bind_contribution(ToolContribution("r", "d", schema, Recorder()))
    assert list(args_model(tool).model_fields) == ["q"]


def test_function_tools_work_too() -> None:
    async def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    structured = as_structured_tool(Tool.from_function(add))
    assert asyncio.run(structured.ainvoke({"a": 2})) == 3


def test_import_toolproof_does_not_import_langchain() -> None:
    code = "import sys, toolproof; print('langchain_core' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "False"


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(), kids, max_size=3),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5))
def test_any_json_object_reaches_the_body_unchanged_through_langchain(
    arguments: dict[str, Any],
) -> None:
    recorder = Recorder()
    structured = as_structured_tool(bind_contribution(ToolContribution("free", "d", {}, recorder)))
    asyncio.run(structured.ainvoke(copy.deepcopy(arguments)))
    assert recorder.calls == [arguments]
    assert json.dumps(recorder.calls[0], sort_keys=True) == json.dumps(arguments, sort_keys=True)
