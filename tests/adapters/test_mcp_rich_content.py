"""Python tools returning ``toolproof.Image``, ``Audio``, ``EmbeddedResource``: MCP blocks."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from mcp import Client

import toolproof
from toolproof import Audio, EmbeddedResource, Image, ResourceLink, Tool, Toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.identity import canonical_json
from toolproof.tools.content import CONTENT_KEY, is_content, rich_value

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "


def picture() -> Image:
    """A tiny picture."""
    return Image(PNG, "image/png")


def sound() -> Audio:
    """A tiny sound."""
    return Audio(WAV, "audio/wav")


def document() -> EmbeddedResource:
    """A text resource."""
    return EmbeddedResource("test://doc", text="hello", mime_type="text/plain")


def binary() -> EmbeddedResource:
    """A binary resource."""
    return EmbeddedResource("test://bin", blob=b"\x00\x01", mime_type="application/octet-stream")


def mixed() -> list[str | Image | EmbeddedResource | ResourceLink]:
    """Several blocks."""
    return ["caption", picture(), document(), ResourceLink("test://doc", "doc")]


def numbers() -> list[int]:
    """A plain list: no rich item, so a value."""
    return [1, 2]


def broken() -> list[Any]:
    """A list mixing an image with a number."""
    return [picture(), 3]


def forged() -> dict[str, Any]:
    """A content value whose block is not MCP content."""
    return {CONTENT_KEY: [{"type": "image", "data": "AAAA"}]}


TOOLS = [picture, sound, document, binary, mixed, numbers, broken, forged]
RICH = {"picture", "sound", "document", "binary", "mixed"}


def served(name: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Toolset() as toolset:
            for fn in TOOLS:
                toolset.add(Tool.from_function(fn))
            toolset.seal()
            async with Client(build_server(toolset)) as client:
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                if name in RICH:  # a rich return annotation lists no output schema
                    assert listed[name].output_schema is None
                result = await client.call_tool(name, {})
                dumped: dict[str, Any] = result.model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )
                if not dumped.get("isError"):
                    dumped.pop("_meta", None)  # the SDK's serverInfo
                return dumped

    return asyncio.run(main())


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_an_image_is_an_image_block_with_its_mime_type() -> None:
    assert served("picture")["content"] == [
        {"type": "image", "data": b64(PNG), "mimeType": "image/png"}
    ]


def test_audio_is_an_audio_block() -> None:
    assert served("sound")["content"] == [
        {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}
    ]


def test_embedded_text_and_binary_resources() -> None:
    assert served("document")["content"] == [
        {
            "type": "resource",
            "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "hello"},
        }
    ]
    assert served("binary")["content"][0]["resource"] == {
        "uri": "test://bin",
        "mimeType": "application/octet-stream",
        "blob": b64(b"\x00\x01"),
    }


def test_a_list_of_blocks_and_strings_is_the_blocks_in_order() -> None:
    answer = served("mixed")
    assert [block["type"] for block in answer["content"]] == [
        "text",
        "image",
        "resource",
        "resource_link",
    ]
    assert answer["content"][0] == {"type": "text", "text": "caption"}
    assert "structuredContent" not in answer


def test_a_plain_list_still_wraps_under_result() -> None:
    answer = served("numbers")
    assert answer["structuredContent"] == {"result": [1, 2]}
    assert answer["content"] == [{"type": "text", "text": "[1,2]"}]


def test_a_list_mixing_blocks_with_other_values_is_an_invalid_result() -> None:
    answer = served("broken")
    assert answer["isError"] is True
    assert answer["content"][0]["text"] == (
        "invalid_result: tool 'broken' returned item 1 of a rich result is a int: a list of "
        "content holds only str, Image, Audio, EmbeddedResource and ResourceLink"
    )
    assert answer["_meta"]["toolproof/failure"]["kind"] == "invalid_result"


def test_blocks_that_are_not_mcp_content_are_an_invalid_result() -> None:
    answer = served("forged")
    assert answer["isError"] is True
    assert answer["content"][0]["text"].startswith(
        "invalid_result: tool 'forged' returned content that is not MCP content: content/0"
    )


def test_the_value_in_process_is_the_content_value_with_exact_bytes() -> None:
    async def main() -> Any:
        return (await Tool.from_function(picture).call({})).unwrap()

    value = asyncio.run(main())
    assert value == {CONTENT_KEY: [{"type": "image", "data": b64(PNG), "mimeType": "image/png"}]}
    assert is_content(value)
    assert base64.b64decode(value[CONTENT_KEY][0]["data"]) == PNG
    assert canonical_json(value).startswith(b'{"toolproof/content":[{"data":"')


def test_rich_values_and_their_refusals() -> None:
    assert rich_value("text") is None
    assert rich_value([1, "a"]) is None
    with pytest.raises(ValueError, match="give exactly one of text and blob"):
        EmbeddedResource("test://x")
    with pytest.raises(TypeError, match=r"Image.data must be bytes, got str"):
        Image("not bytes", "image/png").block()  # type: ignore[arg-type]
    assert toolproof.Image is Image
