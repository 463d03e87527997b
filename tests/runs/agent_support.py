"""Shared agent code for the tests of model-turn order (replay and cassettes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof.identity import canonical_json, digest
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import exchange_key

AgentCode = Callable[[toolproof.Session], Coroutine[Any, Any, None]]


def record_agent(source: toolproof.Toolset | Path, root: Path, task: str, agent: AgentCode) -> Path:
    """Record ``agent`` in a session over ``source`` under ``root``; the run's folder."""

    async def go() -> str:
        async with toolproof.record_session(source, root=root, task=task) as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    return root / "runs" / asyncio.run(go())


def out_of_order_agent(asked: list[int], outputs: list[str], then: str | None = None) -> AgentCode:
    """Two identical requests asked A then B; live, B is answered (and recorded) first.

    Args:
        asked: gains the number of each request the model is asked (1, 2...), live only.
        outputs: gains ``"A: <output> / B: <output>"``, then the output of ``then``.
        then: a third, different prompt to ask after the pair (``None``: none).

    Returns:
        The agent code; it answers with the last of ``outputs``.

    """

    async def agent(session: toolproof.Session) -> None:
        b_finished = asyncio.Event()

        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            number = len(asked) + 1
            asked.append(number)
            if number == 1:  # A's answer waits until B's whole run is over
                await b_finished.wait()
            return ModelResponse(parts=[TextPart(f"response to request {number}")])

        runner = Agent(session.pydantic_ai_model(FunctionModel(respond)))

        async def run_b() -> str:
            output = (await runner.run("same?")).output
            b_finished.set()
            return output

        a, b = await asyncio.gather(runner.run("same?"), run_b())
        outputs.append(f"A: {a.output} / B: {b}")
        if then is not None:
            outputs.append((await runner.run(then)).output)
        session.answer(outputs[-1])

    return agent


HTTP_URL = "http://127.0.0.1:8031/v1/chat/completions"
"""The URL a scripted HTTP model turn names (nothing is asked of it)."""


def http_turn(n: int) -> ModelExchange:
    """A scripted HTTP model turn: question ``q<n>``, answer ``a<n>``, keyed as recorded."""
    body = canonical_json({"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]})
    answer = canonical_json({"choices": [{"message": {"content": f"a{n}"}}]})
    detail = {"method": "POST", "url": HTTP_URL, "status": 200}
    key = digest(exchange_key("http", body, detail))
    return ModelExchange("http", f"POST {HTTP_URL}", body, answer, key, detail=detail)
