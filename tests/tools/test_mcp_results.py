"""The mapping of a ``tools/call`` result (wire form) to a JSON value or a failure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolproof.errors import ToolCallError
from toolproof.sources.mcp.source import result_value

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)
text_blocks = st.builds(lambda text: {"type": "text", "text": text}, st.text(max_size=20))
image_blocks = st.builds(
    lambda data: {"type": "image", "data": data, "mimeType": "image/png"}, st.text(max_size=8)
)
blocks = st.lists(text_blocks | image_blocks, max_size=4)


def value(result: dict[str, Any], structured: bool) -> Any:
    return result_value(result, server="s", tool="t", structured=structured)


@given(st.dictionaries(st.text(max_size=5), json_values), blocks)
def test_structured_content_is_the_value_when_the_tool_declares_an_output_schema(
    structured: dict[str, Any], content: list[dict[str, Any]]
) -> None:
    result = {"content": content, "structuredContent": structured}
    assert value(result, True) == structured


@given(blocks, st.none() | st.dictionaries(st.text(max_size=5), json_values))
def test_without_output_schema_one_plain_text_block_is_a_string_anything_else_the_content(
    content: list[dict[str, Any]], structured: dict[str, Any] | None
) -> None:
    result: dict[str, Any] = {"content": content}
    if structured is not None:
        result["structuredContent"] = structured
    if len(content) == 1 and content[0]["type"] == "text" and structured is None:
        assert value(result, False) == content[0]["text"]
    else:
        expected: dict[str, Any] = {"toolproof/content": content}
        if structured is not None:
            expected["structuredContent"] = structured
        assert value(result, False) == expected


def test_annotations_and_meta_keep_a_single_text_block_a_block() -> None:
    annotated = {"type": "text", "text": "x", "annotations": {"priority": 1}}
    assert value({"content": [annotated]}, False) == {"toolproof/content": [annotated]}
    plain = {"type": "text", "text": "x"}
    assert value({"content": [plain], "_meta": {"k": 1}}, False) == {
        "toolproof/content": [plain],
        "_meta": {"k": 1},
    }


@given(blocks, st.booleans())
def test_is_error_is_always_a_tool_error_with_the_text(
    content: list[dict[str, Any]], structured: bool
) -> None:
    with pytest.raises(ToolCallError) as caught:
        value({"content": content, "isError": True, "structuredContent": {}}, structured)
    failure = caught.value.fields["failure"]
    texts = [block["text"] for block in content if block["type"] == "text"]
    expected = "\n".join(texts) if texts else "(no text content)"
    assert failure.kind == "tool_error"
    assert failure.message == f"MCP tool 't' on server 's' reported an error: {expected}"
    assert failure.detail == {"server": "s", "tool": "t", "content": content}


def test_declared_output_schema_without_structured_content_falls_back_to_the_content() -> None:
    # the Tool then checks the string against outputSchema (an invalid_result)
    assert value({"content": [{"type": "text", "text": "x"}]}, True) == "x"
