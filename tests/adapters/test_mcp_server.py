"""The MCP server's wire mapping, driven in process through the SDK client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from serve_helpers import SERVE_CONFIG, SERVE_TOOLS

from toolproof import Tool, ToolResult, load_toolset
from toolproof.adapters.mcp.server import build_server, mcp_output_schema, mcp_result


def test_object_output_schema_is_listed_as_is() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert mcp_output_schema(schema) == (schema, False)


def test_non_object_output_schema_is_wrapped_under_result() -> None:
    assert mcp_output_schema({"type": "integer"}) == (
        {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        },
        True,
    )


def test_wrapping_rewrites_local_refs_and_keeps_the_dialect() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"$ref": "#/$defs/P"},
        "$defs": {"P": {"type": "object"}},
    }
    wrapped, is_wrapped = mcp_output_schema(schema)
    assert is_wrapped
    assert wrapped == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "result": {
                "type": "array",
                "items": {"$ref": "#/properties/result/$defs/P"},
                "$defs": {"P": {"type": "object"}},
            }
        },
        "required": ["result"],
    }
    assert schema["items"] == {"$ref": "#/$defs/P"}  # the tool's schema is not mutated


def test_no_output_schema_lists_none() -> None:
    assert mcp_output_schema(None) == (None, False)


def test_the_text_block_holds_the_evidence_bytes_of_the_value() -> None:
    tool = Tool.from_function(lambda: None, name="t")
    assert mcp_result(tool, ToolResult.success("héllo")).data == "héllo".encode()
    _, reply, data = mcp_result(tool, ToolResult.success({"b": 1, "a": [1.0, "x"]}))
    assert data == b'{"a":[1,"x"],"b":1}'
    assert reply.content[0].text == '{"a":[1,"x"],"b":1}'


def test_a_value_without_canonical_json_answers_an_invalid_result_failure() -> None:
    tool = Tool.from_function(lambda: None, name="t")
    result, reply, data = mcp_result(tool, ToolResult.success({"big": 10**4300}))
    assert result.failure is not None
    assert (result.failure.kind, reply.is_error) == ("invalid_result", True)
    assert data.decode("utf-8") == (
        "invalid_result: tool 't' returned a value with no canonical JSON form: cannot "
        "canonicalize value at $.big: integer of more than 4300 digits"
    )


def test_an_integer_beyond_the_double_range_is_answered_exactly() -> None:
    tool = Tool.from_function(lambda: None, name="t")
    result, reply, data = mcp_result(tool, ToolResult.success({"big": 2**63 - 1}))
    assert (result.ok, reply.is_error) == (True, False)
    assert data == b'{"big":9223372036854775807}'


async def _with_client(scenario: Any) -> Any:
    async with load_toolset(SERVE_CONFIG) as toolset, Client(build_server(toolset)) as client:
        return await scenario(client)


def run(scenario: Any) -> Any:
    return asyncio.run(_with_client(scenario))


def test_every_tool_is_listed_with_its_schemas_and_annotations() -> None:
    async def scenario(client: Client) -> Any:
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(scenario)
    assert sorted(tools) == SERVE_TOOLS
    add = tools["add"]
    assert add.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "the first addend."},
            "b": {"type": "integer", "default": 1, "description": "the second addend."},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert add.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert add.description == "Add two integers."
    assert add.annotations is not None
    assert (add.annotations.read_only_hint, add.annotations.open_world_hint) == (True, False)
    assert tools["segment"].output_schema is not None
    assert tools["segment"].output_schema["type"] == "object"
    assert tools["explode"].annotations is None


def test_call_answers_text_and_structured_content() -> None:
    async def scenario(client: Client) -> Any:
        return (
            await client.call_tool("add", {"a": 2, "b": 3}),
            await client.call_tool("segment", {"x": 2}),
            await client.call_tool("segments", {"count": 2}),
            await client.call_tool("echo", {"text": "hi there"}),
        )

    added, segment, segments, echoed = run(scenario)
    assert (added.is_error, added.structured_content, added.content[0].text) == (
        False,
        {"result": 5},
        "5",
    )
    assert segment.structured_content == {"start": {"x": 0, "y": 0}, "end": {"x": 2, "y": 2}}
    assert segment.content[0].text == '{"end":{"x":2,"y":2},"start":{"x":0,"y":0}}'
    assert segments.structured_content == {
        "result": [
            {"start": {"x": 0, "y": 0}, "end": {"x": 0, "y": 0}},
            {"start": {"x": 0, "y": 0}, "end": {"x": 1, "y": 1}},
        ]
    }
    assert (echoed.content[0].text, echoed.structured_content) == (
        "hi there",
        {"result": "hi there"},
    )


def test_invalid_arguments_are_an_error_result_naming_the_argument() -> None:
    async def scenario(client: Client) -> Any:
        return await client.call_tool("add", {"a": "5"})

    result = run(scenario)
    assert result.is_error is True
    assert result.content[0].text == (
        "invalid_arguments: invalid arguments for tool 'add': argument 'a': "
        '"5" is not of type "integer"'
    )
    failure = (result.meta or {})["toolproof/failure"]
    assert (failure["kind"], failure["where"]) == ("invalid_arguments", "arguments")
    assert failure["detail"]["errors"] == [
        {"pointer": "/a", "message": '"5" is not of type "integer"'}
    ]


def test_a_failing_body_is_an_error_result_with_the_normalized_message() -> None:
    async def scenario(client: Client) -> Any:
        return await client.call_tool("explode", {"reason": "disk on fire"})

    result = run(scenario)
    assert result.is_error is True
    assert result.content[0].text == (
        "tool_error: tool 'explode' raised RuntimeError: disk on fire"
    )
    assert result.structured_content is None


def test_an_unknown_tool_is_a_protocol_error_naming_it() -> None:
    async def scenario(client: Client) -> Any:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("nope", {})
        return caught.value

    error = run(scenario)
    assert error.code == -32602
    assert error.message == (
        "tool name 'nope': no such tool in this toolset "
        "(known: add, add_args, add_retry, echo, explode, flaky, flaky_retry, segment, "
        "segment_project, segments, whoami, whoami_process)"
    )


def test_served_calls_take_the_in_process_path() -> None:
    async def scenario() -> tuple[ToolResult, Any]:
        async with load_toolset(SERVE_CONFIG) as toolset:
            direct = await toolset["add"].call({"a": 40, "b": 2})
            async with Client(build_server(toolset)) as client:
                served = await client.call_tool("add", {"a": 40, "b": 2})
            return direct, served

    direct, served = asyncio.run(scenario())
    assert served.structured_content == {"result": direct.value}
