"""Resources, templates, prompts and completions of an imported server, served prefixed."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance" / "reference_server.py"


def config(tmp_path: Path) -> Path:
    path = tmp_path / "toolproof.toml"
    path.write_text(
        f'[[mcp]]\nname = "ref"\ncommand = "{sys.executable}"\nargs = ["{REFERENCE}"]\n'
        'protocol = "2025-11-25"\n',  # its scenarios are 2025-11-25 ones (resources/subscribe)
        encoding="utf-8",
    )
    return path


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def scenario(path: Path) -> dict[str, Any]:
    async with (
        load_toolset(path) as toolset,
        Client(build_server(toolset), mode="legacy") as client,  # subscribe: 2025-11-25
    ):
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        text = await client.read_resource("test://static-text")
        binary = await client.read_resource("test://static-binary")
        templated = await client.read_resource("test://template/7/data")
        prompt = await client.get_prompt(
            "ref_test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
        )
        completed = await client.complete(
            types.PromptReference(name="ref_test_prompt_with_arguments"),
            {"name": "arg1", "value": "par"},
        )
        with warnings.catch_warnings():  # removed by protocol 2026-07-28 (Client.listen())
            warnings.simplefilter("ignore")
            subscribed = await client.subscribe_resource("test://watched-resource")
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("test://nowhere")
        return {
            "resources": [(r.name, str(r.uri)) for r in resources],
            "templates": [(t.name, t.uri_template) for t in templates],
            "prompts": [p.name for p in prompts],
            "text": dump(text)["contents"],
            "binary": dump(binary)["contents"][0]["mimeType"],
            "templated": dump(templated)["contents"][0]["text"],
            "prompt": dump(prompt)["messages"],
            "completed": completed.completion.values,
            "subscribed": dump(subscribed),
            "unknown": (unknown.value.error.code, unknown.value.error.message),
        }


def test_an_imported_servers_catalog_is_served_prefixed(tmp_path: Path) -> None:
    seen = asyncio.run(scenario(config(tmp_path)))
    assert seen["resources"] == [
        ("ref_static-text", "test://static-text"),
        ("ref_static-binary", "test://static-binary"),
        ("ref_watched-resource", "test://watched-resource"),
    ]
    assert seen["templates"] == [("ref_template", "test://template/{id}/data")]
    assert seen["prompts"] == [
        "ref_test_simple_prompt",
        "ref_test_prompt_with_arguments",
        "ref_test_prompt_with_embedded_resource",
        "ref_test_prompt_with_image",
    ]
    assert seen["text"] == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    assert seen["binary"] == "image/png"
    assert seen["templated"] == '{"id":"7","templateTest":true,"data":"Data for ID: 7"}'
    assert seen["prompt"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='a', arg2='b'"},
        }
    ]
    assert seen["completed"] == ["paris", "park", "party"]
    assert seen["subscribed"] == {}
    assert seen["unknown"] == (
        -32602,
        "resource 'test://nowhere': no resource or template lists it",
    )


def test_python_resources_and_prompts_are_served() -> None:
    native = REFERENCE.parent / "native.toml"

    async def main() -> dict[str, Any]:
        async with load_toolset(native) as toolset, Client(build_server(toolset)) as client:
            templates = (await client.list_resource_templates()).resource_templates
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            binary = await client.read_resource("test://static-binary")
            templated = await client.read_resource("test://template/9/data")
            image = await client.get_prompt("test_prompt_with_image")
            return {
                "templates": [t.uri_template for t in templates],
                "arguments": dump(prompts["test_prompt_with_arguments"])["arguments"],
                "binary": dump(binary)["contents"][0],
                "templated": dump(templated)["contents"][0]["text"],
                "image": [m["content"]["type"] for m in dump(image)["messages"]],
            }

    seen = asyncio.run(main())
    assert seen["templates"] == ["test://template/{id}/data"]
    assert seen["arguments"] == [
        {"name": "arg1", "required": True},
        {"name": "arg2", "required": True},
    ]
    assert seen["binary"] == {
        "uri": "test://static-binary",
        "mimeType": "image/png",
        "blob": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
        "AAAABJRU5ErkJggg==",
    }
    assert seen["templated"] == '{"id":"9","templateTest":true,"data":"Data for ID: 9"}'
    assert seen["image"] == ["image", "text"]
