"""``toolproof serve`` in front of a real MCP server answers the server's own content blocks.

The official ``mcp`` client calls the npm ``server-everything`` directly and through
``toolproof serve`` (a subprocess, stdio, ``prefix = ""``): images, embedded resources,
resource links, annotations and structured content arrive as the same blocks, and a
recorded session stores the exact content value as the call's evidence.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_support import everything_bin, fixture_entry

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.bundle.evidence import RunEvidence
from toolproof.identity import canonical_json, digest
from toolproof.tools.content import CONTENT_KEY

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hi"}),
    ("get-tiny-image", {}),
    ("get-resource-links", {"count": 3}),
    ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
    ("get-resource-reference", {"resourceType": "Blob", "resourceId": 3}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-structured-content", {"location": "Chicago"}),
]


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "everything"\ncommand = "{everything_bin()}"\n'
        'args = ["stdio"]\nprefix = ""\n',
        encoding="utf-8",
    )
    return config


SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def wire(result: Any) -> dict[str, Any]:
    """A result in wire form, without the serverInfo ``_meta`` the SDK 2.x server adds."""
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = {k: v for k, v in dumped.pop("_meta", {}).items() if k != SERVER_INFO}
    return {**dumped, "_meta": meta} if meta else dumped


CLOCK = re.compile(rb"\d{1,2}:\d{2}:\d{2}\s?[AP]M")


def unclocked(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the wall-clock times server-everything writes into resources masked."""
    for block in result["content"]:
        contents = block.get("resource", {})
        if "text" in contents:
            contents["text"] = CLOCK.sub(b"<time>", contents["text"].encode()).decode()
        if "blob" in contents:
            raw = CLOCK.sub(b"<time>", base64.b64decode(contents["blob"]))
            contents["blob"] = base64.b64encode(raw).decode()
    return result


async def call_all(params: StdioServerParameters) -> list[dict[str, Any]]:
    async with Client(params) as client:
        return [wire(await client.call_tool(name, arguments)) for name, arguments in CALLS]


def test_served_blocks_equal_the_servers_own_blocks(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    direct = StdioServerParameters(command=str(everything_bin()), args=["stdio"])
    proxied = StdioServerParameters(
        command=TOOLPROOF[0], args=[*TOOLPROOF[1:], "serve", "--config", str(config)]
    )
    expected = asyncio.run(call_all(direct))
    answered = asyncio.run(call_all(proxied))
    kinds = [[block["type"] for block in result["content"]] for result in answered]
    assert kinds == [
        ["text"],
        ["text", "image", "text"],
        ["text", "resource_link", "resource_link", "resource_link"],
        ["text", "resource", "text"],
        ["text", "resource", "text"],
        ["text", "image"],
        ["text"],
    ]
    assert answered[1]["content"][1]["mimeType"] == "image/png"
    assert "blob" in answered[4]["content"][1]["resource"]
    assert answered[5]["content"][0]["annotations"] == expected[5]["content"][0]["annotations"]
    # a tool with an outputSchema: structuredContent as itself, its text block the
    # canonical JSON of it (the server's own serialization orders keys differently)
    assert answered[6]["structuredContent"] == expected[6]["structuredContent"]
    [text] = answered.pop(6)["content"]
    assert text["text"].encode() == canonical_json(expected.pop(6)["structuredContent"])
    assert [unclocked(result) for result in answered] == [unclocked(r) for r in expected]


def test_a_recorded_session_stores_the_content_value_as_evidence(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    root = tmp_path / "artifacts"

    async def scenario() -> dict[str, Any]:
        direct = StdioServerParameters(command=str(everything_bin()), args=["stdio"])
        async with Client(direct) as client:
            return wire(await client.call_tool("get-tiny-image", {}))

    expected = asyncio.run(scenario())
    # finalized into a run when the client closes the server's stdin
    proxied = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(config), "--record", str(root)],
    )

    async def recorded() -> dict[str, Any]:
        async with Client(proxied) as client:
            return wire(await client.call_tool("get-tiny-image", {}))

    answered = asyncio.run(recorded())
    assert answered == expected
    [run] = (root / "runs").iterdir()
    value = {CONTENT_KEY: expected["content"]}
    data = canonical_json(value)
    assert RunEvidence.open(run).read(digest(data).removeprefix("sha256:")) == data
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text("utf-8").splitlines()]
    [returned] = [event for event in events if event["type"] == "tool_returned"]
    assert returned["result"]["value"] == value


def test_an_imported_tools_error_answers_its_own_blocks_and_keeps_the_kind(
    tmp_path: Path,
) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(fixture_entry("fixture"), encoding="utf-8")

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with load_toolset(config) as toolset, Client(build_server(toolset)) as client:
            failed = wire(await client.call_tool("fixture_fail", {}))
            multi = wire(await client.call_tool("fixture_multi", {}))
            return failed, multi

    failed, multi = asyncio.run(main())
    assert failed["isError"] is True
    assert failed["content"] == [
        {"type": "text", "text": "boom: bad thing"},
        {"type": "text", "text": "second line"},
    ]
    assert failed["_meta"]["toolproof/failure"]["kind"] == "tool_error"
    assert failed["_meta"]["toolproof/failure"]["message"] == (
        "MCP tool 'fail' on server 'fixture' reported an error: boom: bad thing\nsecond line"
    )
    assert multi["content"] == [
        {"type": "text", "text": "one"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
    ]
