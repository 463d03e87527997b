"""A streamed (SSE) exchange through ``session.httpx_transport()``: recorded, replayed as a stream.

The endpoint is a real HTTP server on 127.0.0.1 (``llm_support.sse_reply``) writing an
OpenAI-compatible ``stream=True`` answer event by event. The ``openai`` SDK reads it as a
stream; a bare ``httpx`` client reads the raw chunks. Frozen, the same chunks come back,
byte for byte and in the same boundaries, and no request leaves the process. The same
agent then streams from the real llama.cpp server ``.ci/services`` starts on
127.0.0.1:8031 (``TOOLPROOF_LLM_BASE_URL`` points elsewhere), token by token.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from llm_support import scripted_model, sse_reply
from openai import AsyncOpenAI

import toolproof
from toolproof import Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.recorded import stream_chunks
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

BASE_URL = os.environ.get("TOOLPROOF_LLM_BASE_URL", "http://127.0.0.1:8031/v1")
QUESTION = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "?"}]}


class Counting(httpx.AsyncBaseTransport):
    """The network, counting the requests that reach it."""

    def __init__(self) -> None:
        self.requests = 0
        self.network = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return await self.network.handle_async_request(request)

    async def aclose(self) -> None:
        await self.network.aclose()


def _toolset() -> Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"A {item} is a green or yellow fruit."

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def streaming_agent(
    base_url: str, model: str, network: Counting, seen: dict[str, Any]
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    """Turn 1: the ``openai`` SDK with ``stream=True``; turn 2: the same request read raw."""

    async def agent(session: Session) -> None:
        found = await session.toolset["lookup"].call({"item": "pear"})
        transport = session.httpx_transport(network)
        async with httpx.AsyncClient(transport=transport, timeout=120) as http:
            client = AsyncOpenAI(api_key="sk-x", base_url=base_url, http_client=http, max_retries=0)
            stream = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": f"{found.value} What colour is a pear?"}],
                temperature=0,
                seed=0,
                max_tokens=12,
                stream=True,
            )
            seen["deltas"] = [c.choices[0].delta.content async for c in stream if c.choices]
            question = {**QUESTION, "model": model, "max_tokens": 12, "temperature": 0}
            async with http.stream("POST", f"{base_url}/chat/completions", json=question) as raw:
                seen["chunks"] = [chunk async for chunk in raw.aiter_raw()]
                seen["content_type"] = raw.headers["content-type"]
        session.answer('The tool said "green or yellow fruit" [call_1].')

    return agent


def _record(tmp_path: Path, agent: Callable[[Session], Coroutine[Any, Any, None]]) -> Path:
    async def go() -> str:
        async with toolproof.record_session(_toolset(), root=tmp_path, task="Pear?") as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    return tmp_path / "runs" / asyncio.run(go())


def recorded_streams(run: Path) -> list[list[bytes]]:
    """Each streamed turn's chunks, cut from its response evidence at its recorded sizes."""
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    evidence = RunEvidence.open(run)
    out = []
    for turn in (e for e in events if e["type"] == "model_turn"):
        chunks = stream_chunks(evidence.read(turn["response"]), turn["detail"])
        assert chunks is not None
        out.append(chunks)
    return out


def check_stream_replay(
    tmp_path: Path, base_url: str, model: str, sent: bytes | None = None
) -> list[list[bytes]]:
    """Record the streaming agent, verify it, replay it frozen; return the recorded chunks."""
    live, seen = Counting(), {}
    run = _record(tmp_path, streaming_agent(base_url, model, live, seen))
    assert live.requests == 2
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    sdk_turn, raw_turn = recorded_streams(run)
    assert seen["chunks"] == raw_turn  # what the client read live is what was recorded
    if sent is not None:
        assert b"".join(sdk_turn) == b"".join(raw_turn) == sent
    frozen, replayed = Counting(), {}
    replay = asyncio.run(
        toolproof.replay_session(run, streaming_agent(base_url, model, frozen, replayed))
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    assert frozen.requests == 0  # nothing reached the network
    assert replayed["chunks"] == raw_turn  # byte for byte, in the same boundaries
    assert replayed["deltas"] == seen["deltas"]
    assert replayed["content_type"] == seen["content_type"]
    assert seen["content_type"].split(";")[0] == "text/event-stream"
    assert asyncio.run(replay_run(run)).identical is True
    return [sdk_turn, raw_turn]


def test_an_sse_stream_is_recorded_and_replayed_in_its_chunks(tmp_path: Path) -> None:
    reply = sse_reply("Green ", "or ", "yellow.")
    assert reply.chunks is not None
    with scripted_model(reply) as server:
        sdk_turn, _ = check_stream_replay(
            tmp_path, server.base_url, "scripted", b"".join(reply.chunks)
        )
    assert server.requests[0]["body"]["stream"] is True
    text = b"".join(sdk_turn).decode()
    assert text.endswith("data: [DONE]\n\n") and '"content": "yellow."' in text


def test_a_whole_body_is_still_read_whole(tmp_path: Path) -> None:
    from llm_support import chat_reply

    async def agent(session: Session) -> None:
        async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
            answer = await http.post(f"{server.base_url}/chat/completions", json=QUESTION)
        session.answer(answer.json()["choices"][0]["message"]["content"])

    with scripted_model(chat_reply("whole")) as server:
        run = _record(tmp_path, agent)
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    (turn,) = [e for e in events if e["type"] == "model_turn"]
    assert "stream" not in turn["detail"]


@pytest.mark.service
@pytest.mark.timeout(300)
def test_the_real_llama_server_stream_is_recorded_and_replayed_in_its_chunks(
    tmp_path: Path,
) -> None:
    try:
        # the server answers one request at a time: another test (the second pytest
        # worker) may be mid-completion, so a busy server gets a generous wait
        models = httpx.get(f"{BASE_URL}/models", timeout=180).json()
    except (httpx.HTTPError, ValueError) as exc:
        message = f"no model server at {BASE_URL} ({exc}); run .ci/services"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    sdk_turn, raw_turn = check_stream_replay(tmp_path, BASE_URL, str(models["data"][0]["id"]))
    for chunks in (sdk_turn, raw_turn):
        text = b"".join(chunks).decode()
        assert text.startswith("data: ") and text.rstrip().endswith("data: [DONE]")
        assert len(chunks) > 1  # a token at a time: more than one chunk to keep apart
