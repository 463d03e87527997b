"""``session.httpx_transport()``: the ``openai`` SDK's HTTP exchanges as model turns, no secrets.

The endpoint is a real HTTP server on 127.0.0.1 (``llm_support.scripted_model``); the
SDK sends its API key, a cookie and other secret headers, and the whole run directory
is searched for them afterwards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from llm_support import Reply, chat_reply, scripted_model
from openai import AsyncOpenAI

import toolproof
from toolproof import ReplayRefused, Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

KEY = "sk-toolproof-SECRET-4242"
COOKIE = "session=cookie-SECRET-77"


def _toolset() -> Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is a fruit"

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _agent(base_url: str, question: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
            client = AsyncOpenAI(
                api_key=KEY,
                base_url=base_url,
                http_client=http,
                max_retries=0,
                default_headers={"x-api-key": KEY, "api-key": KEY, "cookie": COOKIE},
            )
            found = await session.toolset["lookup"].call({"item": "pear"})
            completion = await client.chat.completions.create(
                model="scripted",
                messages=[
                    {"role": "system", "content": f"Tool said: {found.value}"},
                    {"role": "user", "content": question},
                ],
                temperature=0,
            )
        session.answer(str(completion.choices[0].message.content))

    return agent


def _every_byte(run: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file())


def test_http_turns_are_recorded_without_secrets_and_replay_offline(tmp_path: Path) -> None:
    reply = chat_reply('It is "pear is a fruit" [call_1].')
    reply = Reply(reply.status, reply.body, {"set-cookie": COOKIE, "x-request-id": "req-1"})
    with scripted_model(reply) as server:
        base_url = server.base_url

        async def go() -> str:
            async with toolproof.record_session(_toolset(), root=tmp_path, task="What?") as s:
                await _agent(base_url, "What is it?")(s)
            assert s.run_id is not None
            return s.run_id

        run = tmp_path / "runs" / asyncio.run(go())
        sent = list(server.requests)
    assert len(sent) == 1
    assert sent[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert sent[0]["headers"]["cookie"] == COOKIE
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    everything = _every_byte(run)
    assert KEY.encode() not in everything
    assert b"cookie-SECRET" not in everything
    assert b"SECRET" not in everything
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    (turn,) = [e for e in events if e["type"] == "model_turn"]
    detail = turn["detail"]
    assert (turn["source"], detail["method"], detail["status"]) == ("http", "POST", 200)
    assert detail["url"] == f"{base_url}/chat/completions"
    assert turn["model"] == f"POST {base_url}/chat/completions"
    assert sorted(detail["request_headers"]) == ["accept", "content-type"]
    assert detail["response_headers"] == {
        "content-type": "application/json",
        "x-request-id": "req-1",
    }
    request, response = [
        e["evidence"]
        for e in events
        if e["step"] == turn["step"] and e["type"] == "evidence_registered"
    ]
    assert json.loads(RunEvidence.open(run).read(request["id"]))["messages"][1] == {
        "role": "user",
        "content": "What is it?",
    }
    assert RunEvidence.open(run).read(response["id"]) == reply.body
    # the server is gone: a frozen replay reaches no network
    replay = asyncio.run(
        toolproof.replay_session(run, _agent(base_url, "What is it?"), toolset=_toolset())
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 1, 0)
    assert asyncio.run(replay_run(run)).identical is True
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(
            toolproof.replay_session(run, _agent(base_url, "What was it?"), toolset=_toolset())
        )
    assert refused.value.event == turn["idx"]
    assert "an unrecorded http model request (occurrence 1)" in refused.value.message
    assert '-          "content": "What is it?",' in refused.value.message
    assert '+          "content": "What was it?",' in refused.value.message


def test_the_sdk_reads_how_long_a_recorded_and_a_replayed_exchange_took(tmp_path: Path) -> None:
    elapsed: list[object] = []
    with scripted_model(chat_reply("It is a pear.")) as server:
        base_url = server.base_url

        async def agent(session: Session) -> None:
            async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
                client = AsyncOpenAI(api_key=KEY, base_url=base_url, http_client=http)
                raw = await client.chat.completions.with_raw_response.create(
                    model="scripted", messages=[{"role": "user", "content": "Which fruit?"}]
                )
                elapsed.append(raw.elapsed)  # httpx raised here before: never set
                session.answer(str(raw.parse().choices[0].message.content))

        async def go() -> str:
            async with toolproof.record_session(_toolset(), root=tmp_path, task="What?") as s:
                await agent(s)
            assert s.run_id is not None
            return s.run_id

        run = tmp_path / "runs" / asyncio.run(go())
    replay = asyncio.run(toolproof.replay_session(run, agent, toolset=_toolset()))
    assert (replay.identical, replay.live_calls) == (True, 0)
    assert [type(e).__name__ for e in elapsed] == ["timedelta", "timedelta"]
    assert all(e.total_seconds() > 0 for e in elapsed)  # type: ignore[attr-defined]
