"""The ``openai`` SDK through ``session.httpx_transport()`` against the real llama.cpp server.

``.ci/services`` starts llama.cpp's server with SmolLM2-135M-Instruct on 127.0.0.1:8031
(``TOOLPROOF_LLM_BASE_URL`` points elsewhere). The agent looks an item up, asks the real
model about it, and answers quoting the tool; the run is recorded, verified, searched
for the API key, and replayed offline: the replay never opens a connection.
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
from openai import AsyncOpenAI

import toolproof
from toolproof import Session, Tool, Toolset
from toolproof.adapters.frameworks.httpx_transport import RecordingTransport
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

pytestmark = [pytest.mark.service, pytest.mark.timeout(300)]

BASE_URL = os.environ.get("TOOLPROOF_LLM_BASE_URL", "http://127.0.0.1:8031/v1")
KEY = "sk-llama-SECRET-9000"


def _server() -> str:
    try:
        # the server answers one request at a time: another test file (the second pytest
        # worker) may be mid-completion, so a busy server gets a generous wait
        models = httpx.get(f"{BASE_URL}/models", timeout=180).json()
    except (httpx.HTTPError, ValueError) as exc:
        message = f"no model server at {BASE_URL} ({exc}); run .ci/services"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return str(models["data"][0]["id"])


def _toolset() -> Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"A {item} is a green or yellow fruit."

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _agent(
    model: str, transports: list[RecordingTransport]
) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        transport = session.httpx_transport()
        transports.append(transport)
        async with httpx.AsyncClient(transport=transport) as http:
            client = AsyncOpenAI(api_key=KEY, base_url=BASE_URL, http_client=http, max_retries=0)
            found = await session.toolset["lookup"].call({"item": "pear"})
            completion = await client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": "Answer in one short sentence."},
                    {"role": "user", "content": f"{found.value} What colour is a pear?"},
                ],
                temperature=0,
                seed=0,
                max_tokens=24,
            )
        said = str(completion.choices[0].message.content).replace('"', "'")
        session.answer(f'{said} The tool said "green or yellow fruit" [call_1].')

    return agent


def test_a_real_model_turn_is_recorded_verified_and_replayed_offline(tmp_path: Path) -> None:
    model = _server()
    live: list[RecordingTransport] = []

    async def go() -> str:
        async with toolproof.record_session(_toolset(), root=tmp_path, task="Pear?") as session:
            await _agent(model, live)(session)
        assert session.run_id is not None
        return session.run_id

    run = tmp_path / "runs" / asyncio.run(go())
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    (turn,) = [e for e in events if e["type"] == "model_turn"]
    assert (turn["source"], turn["detail"]["status"]) == ("http", 200)
    assert turn["detail"]["url"] == f"{BASE_URL}/chat/completions"
    response = json.loads(
        RunEvidence.open(run).read(
            next(e for e in events if e["idx"] == turn["idx"] - 1)["evidence"]["id"]
        )
    )
    assert response["object"] == "chat.completion"
    everything = b"".join(p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file())
    assert KEY.encode() not in everything
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["status"], claim["citations"][0]["text"]) == (
        "validated",
        "green or yellow fruit",
    )
    frozen: list[RecordingTransport] = []
    replay = asyncio.run(toolproof.replay_session(run, _agent(model, frozen), toolset=_toolset()))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 1, 0)
    assert live[0]._inner is not None and frozen[0]._inner is None  # no connection opened
    assert asyncio.run(replay_run(run)).identical is True
