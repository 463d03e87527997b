"""Credentials handed to the frameworks never reach a run (issue 30 items 2 and 3).

Each test records a real run: a real framework model (pydantic-ai's ``OpenAIChatModel``,
the Agents SDK's ``OpenAIChatCompletionsModel``, the ``openai`` SDK through
``session.httpx_transport()``) talks HTTP to a real scripted server on 127.0.0.1, with a
distinct secret in every place a framework takes one: the base URL's userinfo, extra
headers, extra query parameters, extra body fields (nested too), a ``;jsessionid=``
matrix parameter, a Telegram-style path token, a fragment and a redirect ``Location``.
Every byte of every file of the run directory is searched for each secret afterwards;
the run verifies, and a frozen replay of the same agent code (the same secrets) matches.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from llm_support import Reply, chat_reply, scripted_model
from openai import AsyncOpenAI

import toolproof
from toolproof import Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

SECRETS = {
    "userinfo": "PASS-userinfo-3141",
    "authorization": "SECRET-authorization-1",
    "x-goog-api-key": "SECRET-goog-api-key-2",
    "proxy-authorization": "SECRET-proxy-3",
    "x-auth-token": "SECRET-auth-token-4",
    "query_key": "SECRET-query-key-5",
    "x_amz_signature": "SECRET-amz-signature-6",
    "client_secret": "SECRET-client-secret-7",
    "refresh_token": "SECRET-refresh-8",
    "api_key": "SECRET-body-api-key-9",
    "password": "SECRET-nested-password-10",
    "jsessionid": "SECRET-jsession-11",
    "fragment": "SECRET-fragment-12",
    "bot": "bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
    "sdk_key": "sk-SECRET-sdk-api-key-13",
}


def _every_byte(run: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(run.rglob("*")) if path.is_file())


def _found(run: Path) -> list[str]:
    everything = _every_byte(run)
    return sorted(name for name, secret in SECRETS.items() if secret.encode() in everything)


def _digest(secret: str) -> str:
    return "REDACTED:sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:16]


HEADERS = {
    "Authorization-Extra": "not a secret name",
    "Authorization": f"Bearer {SECRETS['authorization']}",
    "X-Goog-Api-Key": SECRETS["x-goog-api-key"],
    "Proxy-Authorization": SECRETS["proxy-authorization"],
    "X-Auth-Token": SECRETS["x-auth-token"],
}
BODY = {
    "client_secret": SECRETS["client_secret"],
    "refresh_token": SECRETS["refresh_token"],
    "api_key": SECRETS["api_key"],
    "options": {"login": {"password": SECRETS["password"], "user": "ada"}},
}
QUERY = {"key": SECRETS["query_key"], "X-Amz-Signature": SECRETS["x_amz_signature"]}


def _toolset() -> Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is a fruit"

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _record(tmp_path: Path, agent: Callable[[Session], Coroutine[Any, Any, None]]) -> Path:
    async def go() -> str:
        async with toolproof.record_session(_toolset(), root=tmp_path, task="What?") as s:
            await agent(s)
        assert s.run_id is not None
        return s.run_id

    return tmp_path / "runs" / asyncio.run(go())


def _replays(run: Path, agent: Callable[[Session], Coroutine[Any, Any, None]], turns: int) -> None:
    verification = verify_run(run)
    assert verification.ok, [str(f) for f in verification.failures]
    replay = asyncio.run(toolproof.replay_session(run, agent, toolset=_toolset()))
    assert (replay.identical, replay.turns, replay.live_calls) == (True, turns, 0)
    assert asyncio.run(replay_run(run)).identical is True


def _request(run: Path) -> dict[str, Any]:
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    kinds = [e for e in events if e["type"] == "evidence_registered"]
    (first,) = [e for e in kinds if e["evidence"]["source"]["kind"] == "model_request"][:1]
    parsed: dict[str, Any] = json.loads(RunEvidence.open(run).read(first["evidence"]["id"]))
    return parsed


def _with_userinfo(base_url: str) -> str:
    return base_url.replace("http://", f"http://ada:{SECRETS['userinfo']}@")


def _pai_agent(base_url: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def agent(session: Session) -> None:
        provider = OpenAIProvider(base_url=_with_userinfo(base_url), api_key=SECRETS["sdk_key"])
        model = OpenAIChatModel("scripted", provider=provider)
        runner = Agent(
            session.pydantic_ai_model(model),
            model_settings={"extra_headers": HEADERS, "extra_body": BODY},
        )
        first = await runner.run("Which fruit?")
        second = await runner.run("And now?", message_history=first.all_messages())
        session.answer(second.output)

    return agent


def test_pydantic_ai_settings_and_provider_url_are_recorded_redacted(tmp_path: Path) -> None:
    with scripted_model(chat_reply("A pear.")) as server:
        base_url = server.base_url
        run = _record(tmp_path, _pai_agent(base_url))
        sent = list(server.requests)
    assert sent[0]["headers"]["x-auth-token"] == SECRETS["x-auth-token"]  # the secrets went out
    assert sent[0]["body"]["options"]["login"]["password"] == SECRETS["password"]
    assert _found(run) == []
    request = _request(run)
    settings = request["model_settings"]
    assert settings["extra_headers"] == {
        "Authorization-Extra": "not a secret name",
        "Authorization": _digest(f"Bearer {SECRETS['authorization']}"),
        "X-Goog-Api-Key": _digest(SECRETS["x-goog-api-key"]),
        "Proxy-Authorization": _digest(SECRETS["proxy-authorization"]),
        "X-Auth-Token": _digest(SECRETS["x-auth-token"]),
    }
    assert settings["extra_body"]["options"] == {
        "login": {"password": _digest(SECRETS["password"]), "user": "ada"}
    }
    stored = RunEvidence.open(run)
    responses = [
        json.loads(stored.read(name))
        for name in stored.names()
        if b'"provider_url"' in stored.read(name)
    ]
    assert responses and {
        r.get("provider_url") for r in responses if r.get("kind") == "response"
    } == {f"{base_url}/"}
    _replays(run, _pai_agent(base_url), 2)


def _agents_agent(base_url: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner

    async def agent(session: Session) -> None:
        client = AsyncOpenAI(
            base_url=_with_userinfo(base_url), api_key=SECRETS["sdk_key"], max_retries=0
        )
        model = OpenAIChatCompletionsModel("scripted", openai_client=client)
        runner = Agent(
            name="fruit",
            instructions="Answer.",
            model=session.openai_agents_model(model),
            model_settings=ModelSettings(extra_headers=HEADERS, extra_query=QUERY, extra_body=BODY),
        )
        result = await Runner.run(
            runner, "Which fruit?", run_config=RunConfig(tracing_disabled=True)
        )
        session.answer(str(result.final_output))

    return agent


def test_agents_sdk_model_settings_are_recorded_redacted(tmp_path: Path) -> None:
    with scripted_model(chat_reply("A pear.")) as server:
        base_url = server.base_url
        run = _record(tmp_path, _agents_agent(base_url))
        sent = list(server.requests)
    assert SECRETS["query_key"] in sent[0]["path"]  # the secrets went out
    assert sent[0]["body"]["client_secret"] == SECRETS["client_secret"]
    assert _found(run) == []
    settings = _request(run)["model_settings"]
    assert settings["extra_query"] == {
        "key": _digest(SECRETS["query_key"]),
        "X-Amz-Signature": _digest(SECRETS["x_amz_signature"]),
    }
    assert settings["extra_body"]["refresh_token"] == _digest(SECRETS["refresh_token"])
    assert settings["extra_headers"]["X-Goog-Api-Key"] == _digest(SECRETS["x-goog-api-key"])
    _replays(run, _agents_agent(base_url), 1)


def _http_agent(base_url: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        path_url = (
            f"{_with_userinfo(base_url)}/{SECRETS['bot']}/app;jsessionid={SECRETS['jsessionid']}"
        )
        async with httpx.AsyncClient(
            transport=session.httpx_transport(), follow_redirects=True
        ) as http:
            client = AsyncOpenAI(
                api_key=SECRETS["sdk_key"],
                base_url=path_url,
                http_client=http,
                max_retries=0,
                default_headers=HEADERS,
                default_query=QUERY,
            )
            completion = await client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "Which fruit?"}],
                extra_body=BODY,
            )
            moved = await http.post(f"{base_url}/moved#{SECRETS['fragment']}", json={"n": 1})
        session.answer(f"{completion.choices[0].message.content} {moved.status_code}")

    return agent


def test_http_exchanges_are_recorded_redacted_and_replay_matches(tmp_path: Path) -> None:
    redirect = f"/v1/landing?access_token={SECRETS['refresh_token']}&page=2"
    replies = [
        chat_reply("A pear."),
        Reply(307, b"", {"location": redirect}),
        Reply(200, b"{}", {}),
    ]
    with scripted_model(*replies) as server:
        base_url = server.base_url
        run = _record(tmp_path, _http_agent(base_url))
        sent = list(server.requests)
    assert [r["path"].split("?")[0] for r in sent][1:] == ["/v1/moved", "/v1/landing"]
    assert _found(run) == []
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    turns = [e for e in events if e["type"] == "model_turn"]
    host = base_url.removesuffix("/v1")
    assert [(t["detail"]["url"], t["detail"]["status"]) for t in turns] == [
        (
            f"{base_url}/{_digest(SECRETS['bot'])}/app;jsessionid={_digest(SECRETS['jsessionid'])}"
            f"/chat/completions?key={_digest(SECRETS['query_key'])}"
            f"&X-Amz-Signature={_digest(SECRETS['x_amz_signature'])}",
            200,
        ),
        (f"{base_url}/moved#{_digest(SECRETS['fragment'])}", 307),
        (  # httpx carries the fragment over to the redirect (RFC 9110 section 10.2.2)
            f"{host}/v1/landing?access_token={_digest(SECRETS['refresh_token'])}&page=2"
            f"#{_digest(SECRETS['fragment'])}",
            200,
        ),
    ]
    assert turns[1]["detail"]["response_headers"]["location"] == (
        f"/v1/landing?access_token={_digest(SECRETS['refresh_token'])}&page=2"
    )
    assert _request(run)["options"] == {
        "login": {"password": _digest(SECRETS["password"]), "user": "ada"}
    }
    _replays(run, _http_agent(base_url), 3)


@pytest.mark.parametrize("place", ["pydantic-ai", "agents"])
def test_a_replay_with_another_secret_is_refused(tmp_path: Path, place: str) -> None:
    """The digest keeps the secret's identity: a different secret is a different request."""
    make = _pai_agent if place == "pydantic-ai" else _agents_agent
    with scripted_model(chat_reply("A pear.")) as server:
        base_url = server.base_url
        run = _record(tmp_path, make(base_url))
    BODY["api_key"] = "SECRET-another-key"
    try:
        with pytest.raises(toolproof.ReplayRefused) as refused:
            asyncio.run(toolproof.replay_session(run, make(base_url), toolset=_toolset()))
    finally:
        BODY["api_key"] = SECRETS["api_key"]
    lines = [line.replace(" ", "") for line in refused.value.message.splitlines()]
    assert f'-"api_key":"{_digest(SECRETS["api_key"])}",' in lines
    assert f'+"api_key":"{_digest("SECRET-another-key")}",' in lines
    assert "SECRET" not in refused.value.message.replace("SECRET-another-key", "")
