"""A proxied 2026-07-28 server sees the capabilities of the client that made the call.

``toolproof serve`` in front of an ``[[mcp]]`` server (here through :func:`build_server`
with ``relay=True``, what ``serve`` runs) relays that server's questions to its own client.
Over 2026-07-28 each request declares its client's capabilities and the server asks
only what they allow, so the proxy forwards those of the client that made the call
(issue 33 point 7; the conformance scenario ``input-required-result-capability-check``):
``tests/fixtures/mcp_capabilities_server.py``'s ``declared`` answers what its request
declared. A call made from Python (no client of its own) declares what toolproof's client
announces. An upstream ``-32021`` (missing required client capability) reaches a 2026-07-28
client as ``-32021`` with its ``requiredCapabilities``, for ``tools/call``, ``prompts/get``
and ``resources/read`` alike.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.sources.mcp.callers import forwarded_capabilities

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_capabilities_server.py"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
"""What toolproof's client always announces beside the asking capabilities."""
ELICITATION = {"form": {}, "url": {}}
"""The SDK client's elicitation capability (it has a callback)."""


def proxy(tmp_path: Path) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(
        f'[[mcp]]\nname = "cap"\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n',
        encoding="utf-8",
    )
    return path


async def elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def sample(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="no"), model="m"
    )


def seen_through_proxy(tmp_path: Path, mode: str, **callbacks: Any) -> dict[str, Any]:
    """What the upstream's ``declared`` saw, called by an SDK client (``mode``) via the proxy."""

    async def main() -> Any:
        async with (
            load_toolset(proxy(tmp_path), relay=True) as toolset,
            Client(build_server(toolset), mode=mode, **callbacks) as client,  # type: ignore[arg-type]
        ):
            return await client.call_tool("cap_declared", {})

    result = asyncio.run(main())
    assert result.is_error is False, result
    seen: dict[str, Any] = json.loads(result.structured_content["result"])
    return seen


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_a_client_without_elicitation_is_seen_without_it(tmp_path: Path, mode: str) -> None:
    seen = seen_through_proxy(tmp_path, mode, sampling_callback=sample)
    assert seen == {**TASKS, "sampling": {}}


def test_a_client_with_elicitation_is_seen_with_it(tmp_path: Path) -> None:
    seen = seen_through_proxy(tmp_path, "2026-07-28", elicitation_callback=elicit)
    assert seen == {**TASKS, "elicitation": ELICITATION}


def test_a_client_with_both_is_seen_with_both_and_one_with_none_with_neither(
    tmp_path: Path,
) -> None:
    both = seen_through_proxy(
        tmp_path, "2026-07-28", elicitation_callback=elicit, sampling_callback=sample
    )
    assert both == {**TASKS, "elicitation": ELICITATION, "sampling": {}}
    assert seen_through_proxy(tmp_path, "2026-07-28") == TASKS


def test_a_call_from_python_declares_what_toolproofs_client_announces(tmp_path: Path) -> None:
    async def main() -> Any:
        async with load_toolset(proxy(tmp_path), relay=True) as toolset:
            return (await toolset["cap_declared"].call({})).value

    seen = json.loads(asyncio.run(main())["result"])
    announced = {"elicitation": ELICITATION, "sampling": {}, "roots": {"listChanged": True}}
    assert seen == {**TASKS, **announced}


def test_forwarded_capabilities_keeps_only_what_both_declare_as_the_caller_declared() -> None:
    ours = {"sampling": {}, "elicitation": ELICITATION, "extensions": {"x": {}}}
    theirs = {"sampling": {"tools": {}}, "roots": {}, "experimental": {"y": {}}}
    assert forwarded_capabilities(ours, theirs) == {
        "sampling": {"tools": {}},
        "extensions": {"x": {}},
    }


def test_an_upstream_refusal_for_a_missing_capability_reaches_the_client_as_minus_32021(
    tmp_path: Path,
) -> None:
    # tests/fixtures/mcp_asking_server.py's haiku samples; the client declared no sampling,
    # so the upstream (seeing none) answers -32021, and so does the proxy
    asking = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_asking_server.py"
    path = tmp_path / "proxy.toml"
    path.write_text(
        f'[[mcp]]\nname = "ask"\ncommand = "{sys.executable}"\nargs = ["{asking}"]\n',
        encoding="utf-8",
    )

    async def main() -> types.ErrorData:
        async with (
            load_toolset(path, relay=True) as toolset,
            Client(build_server(toolset), mode="2026-07-28", elicitation_callback=elicit) as client,
        ):
            with pytest.raises(MCPError) as raised:
                await client.call_tool("ask_haiku", {"topic": "ponds"})
            return raised.value.error

    error = asyncio.run(main())
    assert (error.code, error.message, error.data) == (
        -32021,
        "the client did not declare the capability this call's question needs",
        {"requiredCapabilities": {"sampling": {}}},
    )


async def _prompt(client: Client) -> Any:
    return await client.get_prompt("cap_needs_sampling")


async def _resource(client: Client) -> Any:
    return await client.read_resource("cap://needs-sampling/x")


@pytest.mark.parametrize("ask", [_prompt, _resource], ids=["prompts/get", "resources/read"])
def test_an_upstream_minus_32021_on_a_prompt_or_resource_reaches_the_client_as_minus_32021(
    tmp_path: Path, ask: Any
) -> None:
    # the fixture's prompt and resource need sampling; the caller's client declared only
    # elicitation, the proxy forwarded that, the upstream answered -32021, so does the proxy
    async def main() -> types.ErrorData:
        async with (
            load_toolset(proxy(tmp_path), relay=True) as toolset,
            Client(build_server(toolset), mode="2026-07-28", elicitation_callback=elicit) as client,
        ):
            with pytest.raises(MCPError) as raised:
                await ask(client)
            return raised.value.error

    error = asyncio.run(main())
    assert (error.code, error.message, error.data) == (
        -32021,
        "the client did not declare the capability this call's question needs",
        {"requiredCapabilities": {"sampling": {}}},
    )


def test_a_prompt_and_a_resource_answer_a_client_that_declared_what_they_need(
    tmp_path: Path,
) -> None:
    async def main() -> tuple[Any, Any]:
        async with (
            load_toolset(proxy(tmp_path), relay=True) as toolset,
            Client(build_server(toolset), mode="2026-07-28", sampling_callback=sample) as client,
        ):
            return await _prompt(client), await _resource(client)

    prompt, resource = asyncio.run(main())
    assert [message.content.text for message in prompt.messages] == ["sampled"]
    assert [content.text for content in resource.contents] == ["sampled"]
