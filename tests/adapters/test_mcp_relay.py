"""Log, progress, sampling and elicitation reach the client that made the call.

Natively (a Python tool asking for ``toolproof.Context``) and as a proxy (the same
scenarios of ``tests/fixtures/conformance/reference_server.py`` imported over stdio),
driven by the official ``mcp`` client in process; ``logging/setLevel`` filters.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from toolproof import Context, Tool, load_toolset
from toolproof.adapters.mcp.server import build_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
NATIVE = FIXTURES / "native.toml"


def proxy_config(tmp_path: Path) -> Path:
    config = tmp_path / "proxy.toml"
    config.write_text(
        f'[[mcp]]\nname = "reference"\ncommand = "{sys.executable}"\n'
        f'args = ["{FIXTURES / "reference_server.py"}"]\nprefix = ""\n'
        'protocol = "2025-11-25"\n',  # it asks with server-initiated requests (2025-11-25)
        encoding="utf-8",
    )
    return config


async def drive(config: Path, level: str | None = None) -> dict[str, Any]:
    logs: list[tuple[str, Any]] = []
    progress: list[tuple[float, float | None]] = []
    asked: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data))

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params.messages[0].content.model_dump(exclude_none=True))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="a sampled answer"), model="m"
        )

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "a@b"})

    async with load_toolset(config, relay=True) as toolset:  # as toolproof serve loads it
        client = Client(
            build_server(toolset),
            logging_callback=on_log,
            sampling_callback=on_sampling,
            elicitation_callback=on_elicit,
            mode="legacy",  # the 2025-11-25 handshake: server-initiated requests and logs
        )
        async with client:
            if level is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.set_logging_level(level)  # type: ignore[arg-type]
            logged = await client.call_tool("test_tool_with_logging", {})
            await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            sampled = await client.call_tool("test_sampling", {"prompt": "why?"})
            elicited = await client.call_tool("test_elicitation", {"message": "who?"})
    return {
        "logs": logs,
        "logged": logged.content[0].text,  # type: ignore[union-attr]
        "progress": progress,
        "asked": asked,
        "sampled": sampled.content[0].text,  # type: ignore[union-attr]
        "elicited": elicited.content[0].text,  # type: ignore[union-attr]
    }


EXPECTED = {
    "logs": [
        ("info", "Tool execution started"),
        ("info", "Tool processing data"),
        ("info", "Tool execution completed"),
    ],
    "logged": "Tool with logging executed successfully",
    "progress": [(0.0, 100.0), (50.0, 100.0), (100.0, 100.0)],
    "asked": [{"type": "text", "text": "why?"}, "who?"],
    "sampled": "LLM response: a sampled answer",
    "elicited": "User response: action=accept, content={'username': 'ada', 'email': 'a@b'}",
}


@pytest.mark.parametrize("column", ["native", "proxy"])
def test_log_progress_sampling_and_elicitation_reach_the_calling_client(
    column: str, tmp_path: Path
) -> None:
    config = NATIVE if column == "native" else proxy_config(tmp_path)
    assert asyncio.run(drive(config)) == EXPECTED


@pytest.mark.parametrize("column", ["native", "proxy"])
def test_set_level_filters_the_relayed_log_messages(column: str, tmp_path: Path) -> None:
    config = NATIVE if column == "native" else proxy_config(tmp_path)
    assert asyncio.run(drive(config, level="warning"))["logs"] == []


def test_context_is_never_in_the_schema_and_outside_serve_it_cannot_ask() -> None:
    async def ask(question: str, ctx: Context) -> str:
        await ctx.info("noted")  # to the toolproof.tool logger: no channel here
        await ctx.report_progress(1, 2)  # dropped
        answer = await ctx.sample(question)
        return str(answer)

    tool = Tool.from_function(ask)
    assert tool.spec.input_schema["properties"] == {"question": {"type": "string"}}
    failure = asyncio.run(tool.call({"question": "why?"})).failure
    assert failure is not None
    assert (failure.kind, failure.message) == (
        "unavailable",
        "sampling needs a client to ask: this call was not made through toolproof serve "
        "(or runs in a worker process)",
    )
    refused = asyncio.run(tool.call({"question": "why?", "ctx": {}})).failure
    assert refused is not None and refused.kind == "invalid_arguments"


def test_a_2025_client_without_sampling_gets_an_unavailable_failure() -> None:
    # over 2026-07-28 it is the JSON-RPC error -32021 (tests/adapters/test_mcp_input_required.py)
    async def main() -> Any:
        async with (
            load_toolset(NATIVE) as toolset,
            Client(build_server(toolset), mode="legacy") as client,
        ):
            return await client.call_tool("test_sampling", {"prompt": "why?"})

    answer = asyncio.run(main())
    assert answer.is_error
    assert answer.content[0].text == (  # type: ignore[union-attr]
        "unavailable: the client did not declare the capability sampling needs"
    )
