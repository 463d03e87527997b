"""A served tool's questions: input-required rounds on 2026-07-28, requests on 2025-11-25.

The tool (written to ``tmp_path`` as a ``[[python]]`` module) elicits a name, then samples
a haiku, then answers with both and how many times its body started. The official SDK's
``mcp.Client`` calls it through :func:`build_server` (what ``toolproof serve`` runs): over
2026-07-28 each question is an ``InputRequiredResult`` and the retry resumes the same
body (it started once); over 2025-11-25 they are ``elicitation/create`` and
``sampling/createMessage`` requests. A client that declared no elicitation gets -32021.
Also: ``toolproof serve --record`` over stdio keeps each round's question and answer, an
imported server's question (either revision upstream) reaches a 2026 client as a round,
and so does an imported prompt's (``tests/fixtures/mcp_asking_prompt_server.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.verify.verifier import verify_run

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
MODULE = '''
import toolproof
from toolproof import Context

STARTS = []
WHO = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@toolproof.tool
async def greet(greeting: str, ctx: Context) -> str:
    """Greets whoever answers, with a haiku."""
    STARTS.append(greeting)
    who = await ctx.elicit("Who is asking?", WHO)
    poem = await ctx.sample(f"A haiku for {who['content']['name']}", max_tokens=20)
    starts = STARTS.count(greeting)
    return f"{greeting}, {who['content']['name']}! {poem['content']['text']} ({starts} start)"
'''

ANSWER = "Hello, Ada! old pond (1 start)"
ELICIT = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Who is asking?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "A haiku for Ada"}}],
        "maxTokens": 20,
    },
}
ADA = types.ElicitResult(action="accept", content={"name": "Ada"})
HAIKU = types.CreateMessageResult(
    role="assistant", content=types.TextContent(text="old pond"), model="m1"
)


def config(tmp_path: Path) -> Path:
    (tmp_path / "asking_tools.py").write_text(MODULE, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text('[[python]]\nmodule = "asking_tools"\n', encoding="utf-8")
    return path


def dumped(result: Any) -> dict[str, Any]:
    wire: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def test_a_2026_client_sees_input_required_and_the_body_resumes_with_its_answers(
    tmp_path: Path,
) -> None:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return ADA  # declares the capability; the rounds below answer by hand

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        return HAIKU

    async def main() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(
                build_server(toolset),
                mode="2026-07-28",
                elicitation_callback=elicit,
                sampling_callback=sample,
            ) as client,
        ):
            session = client.session
            first = await session.call_tool(
                "greet", {"greeting": "Hello"}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            seen.append(dumped(first)["inputRequests"])
            second = await session.call_tool(
                "greet",
                {"greeting": "Hello"},
                input_responses={"q1": ADA},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, types.InputRequiredResult)
            seen.append(dumped(second)["inputRequests"])
            last = await session.call_tool(
                "greet",
                {"greeting": "Hello"},
                input_responses={"q2": HAIKU},
                request_state=second.request_state,
                allow_input_required=True,
            )
            assert isinstance(last, types.CallToolResult)
            seen.append(dumped(last)["structuredContent"])
        return seen

    assert asyncio.run(main()) == [{"q1": ELICIT}, {"q2": SAMPLE}, {"result": ANSWER}]


@pytest.mark.parametrize(("mode", "greeting"), [("2026-07-28", "Hi"), ("legacy", "Hey")])
def test_the_sdk_client_answers_over_both_revisions(
    tmp_path: Path, mode: str, greeting: str
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return ADA

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return HAIKU

    async def main() -> Any:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(
                build_server(toolset),
                mode=mode,  # type: ignore[arg-type]
                elicitation_callback=elicit,
                sampling_callback=sample,
            ) as client,
        ):
            assert client.session.protocol_version == (
                "2026-07-28" if mode == "2026-07-28" else "2025-11-25"
            )
            return await client.call_tool("greet", {"greeting": greeting})

    result = asyncio.run(main())
    answer = f"{greeting}, Ada! old pond (1 start)"  # the body started once (it resumed)
    assert (result.is_error, result.structured_content) == (False, {"result": answer})
    assert asked == ["Who is asking?", "A haiku for Ada"]


def test_a_2026_client_without_elicitation_gets_minus_32021(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(build_server(toolset), mode="2026-07-28") as client,
        ):
            with pytest.raises(MCPError) as raised:
                await client.call_tool("greet", {"greeting": "Howdy"})
            errors.append(raised.value.error)

    errors: list[types.ErrorData] = []
    asyncio.run(main())
    assert (errors[0].code, errors[0].message, errors[0].data) == (
        -32021,
        "the client did not declare the capability this call's question needs",
        {"requiredCapabilities": {"elicitation": {}}},
    )


def test_a_forged_request_state_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            load_toolset(config(tmp_path)) as toolset,
            Client(build_server(toolset), mode="2026-07-28") as client,
        ):
            with pytest.raises(MCPError) as raised:
                await client.session.call_tool(
                    "greet",
                    {"greeting": "Hello"},
                    input_responses={"q1": ADA},
                    request_state="v1.forged",
                    allow_input_required=True,
                )
            errors.append(raised.value.error)

    errors: list[types.ErrorData] = []
    asyncio.run(main())
    assert (errors[0].code, errors[0].message) == (
        -32602,
        "Invalid or expired requestState",
    )


@pytest.mark.timeout(120)
def test_serve_record_over_stdio_keeps_each_rounds_question_and_answer(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    server = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(config(tmp_path)), "--record", str(root)],
    )

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return ADA

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        return HAIKU

    async def main() -> Any:
        client = Client(
            server, mode="2026-07-28", elicitation_callback=elicit, sampling_callback=sample
        )
        async with client:
            return await client.call_tool("greet", {"greeting": "Hello"})

    result = asyncio.run(main())
    assert (result.is_error, result.structured_content) == (False, {"result": ANSWER})
    [run] = (root / "runs").iterdir()
    lines = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    relayed = [
        (e["step"], e["method"], e["request"], e["answer"])
        for e in events
        if e["type"] == "request_relayed"
    ]
    assert relayed == [
        ("call-00000001", "elicitation/create", ELICIT["params"], dumped(ADA)),
        ("call-00000001", "sampling/createMessage", SAMPLE["params"], dumped(HAIKU)),
    ]
    verification = verify_run(run)
    assert verification.ok, verification.failures


@pytest.mark.parametrize("legacy", [False, True], ids=["upstream-2026", "upstream-2025"])
def test_an_imported_servers_question_reaches_a_2026_client_as_a_round(
    tmp_path: Path, legacy: bool
) -> None:
    # tests/fixtures/mcp_asking_server.py asks "Who is asking?" during ask_greet
    asking = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_asking_server.py"
    path = tmp_path / "proxy.toml"
    env = '\nenv = { ASKING_LEGACY = "1" }' if legacy else ""
    path.write_text(
        f'[[mcp]]\nname = "ask"\ncommand = "{sys.executable}"\nargs = ["{asking}"]{env}\n',
        encoding="utf-8",
    )

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return ADA

    async def main() -> list[Any]:
        async with (
            load_toolset(path, relay=True) as toolset,
            Client(build_server(toolset), mode="2026-07-28", elicitation_callback=elicit) as client,
        ):
            session = client.session
            first = await session.call_tool(
                "ask_greet", {"greeting": "Hello"}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            [(key, request)] = (first.input_requests or {}).items()
            last = await session.call_tool(
                "ask_greet",
                {"greeting": "Hello"},
                input_responses={key: ADA},
                request_state=first.request_state,
            )
            return [key, request.method, request.params.message, last.structured_content]

    # a 2026 upstream's question keeps its key (the SDK's resolver names it after the
    # function); a 2025 upstream's request has none: serve names it q1
    assert asyncio.run(main()) == [
        "q1" if legacy else "__main__:ask_who",
        "elicitation/create",
        "Who is asking?",
        {"result": "Hello, Ada!"},
    ]


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_an_imported_prompt_that_asks_is_relayed_over_both_revisions(
    tmp_path: Path, mode: str
) -> None:
    # tests/fixtures/mcp_asking_prompt_server.py: its prompt asks "Who is asking?"
    asking = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_asking_prompt_server.py"
    path = tmp_path / "proxy.toml"
    path.write_text(
        f'[[mcp]]\nname = "ask"\ncommand = "{sys.executable}"\nargs = ["{asking}"]\n',
        encoding="utf-8",
    )
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return ADA

    async def main() -> Any:
        async with (
            load_toolset(path, relay=True) as toolset,
            Client(build_server(toolset), mode=mode, elicitation_callback=elicit) as client,  # type: ignore[arg-type]
        ):
            [name] = [prompt.name for prompt in (await client.list_prompts()).prompts]
            if mode == "2026-07-28":  # one round, answered by hand
                first = await client.session.get_prompt(name, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult)
                # the upstream's key "who" is kept by the relay
                kinds.append(dumped(first)["inputRequests"]["who"]["method"])
            return await client.get_prompt(name)

    kinds: list[str] = []
    prompt = asyncio.run(main())
    assert [message.content.text for message in prompt.messages] == ["Please introduce Ada."]
    assert asked == ["Who is asking?"]
    assert kinds == (["elicitation/create"] if mode == "2026-07-28" else [])
