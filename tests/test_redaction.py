"""The one credential redaction policy (issue 30 items 2 and 3): names, URLs, JSON, bodies."""

from __future__ import annotations

import hashlib
import json

import pytest

from toolproof.redaction import (
    is_redacted,
    redact_body,
    redact_form,
    redact_headers,
    redact_json,
    redact_url,
    redacted,
    secret_name,
)


def _r(secret: str) -> str:
    return "REDACTED:sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "proxy-authorization",
        "Cookie",
        "Set-Cookie",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "X-Goog-Api-Key",
        "x-auth-token",
        "X-Amz-Security-Token",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "access_token",
        "access-token",
        "refresh_token",
        "id_token",
        "token",
        "key",
        "sig",
        "signature",
        "client_secret",
        "password",
        "passwd",
        "secret",
        "auth",
        "code",
        "jsessionid",
        "aws_secret_access_key",
        "db_password",
    ],
)
def test_secret_names(name: str) -> None:
    assert secret_name(name) is True


@pytest.mark.parametrize(
    "name",
    [
        "content-type",
        "idempotency-key",
        "prompt_cache_key",
        "max_tokens",
        "max_completion_tokens",
        "x-request-id",
        "keyword",
        "author",
        "authorization-extra",
        "tokens",
        "user",
    ],
)
def test_names_that_are_not_secret(name: str) -> None:
    assert secret_name(name) is False


def test_a_redacted_value_is_the_prefix_and_16_hex_of_its_sha256_and_stays_redacted() -> None:
    assert redacted("s3cret") == _r("s3cret") == "REDACTED:sha256:1ec1c26b50d5d3c5"
    assert redacted(123456) == _r("123456")
    assert redacted(redacted("s3cret")) == redacted("s3cret")
    assert is_redacted(redacted("x")) and not is_redacted("REDACTED") and not is_redacted(3)
    assert (
        redacted("\ud800") == "REDACTED:sha256:" + hashlib.sha256(b"\xed\xa0\x80").hexdigest()[:16]
    )


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("https://api.example/v1/chat", "https://api.example/v1/chat"),
        ("https://ada:pw@api.example:8443/v1", "https://api.example:8443/v1"),
        (
            "https://b.s3.example/o?X-Amz-Credential=c&X-Amz-Signature=s&X-Amz-Expires=60",
            f"https://b.s3.example/o?X-Amz-Credential={_r('c')}&X-Amz-Signature={_r('s')}"
            "&X-Amz-Expires=60",
        ),
        (
            "https://h/cb?code=abc&state=xyz&client_secret=a%20b",
            f"https://h/cb?code={_r('abc')}&state=xyz&client_secret={_r('a b')}",
        ),
        (
            "https://h/app;jsessionid=ABC;lang=en/page?q=1",
            f"https://h/app;jsessionid={_r('ABC')};lang=en/page?q=1",
        ),
        (
            "https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe",
            f"https://api.telegram.org/{_r('bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw')}/getMe",
        ),
        ("https://h/robot42/x", "https://h/robot42/x"),
        ("https://h/cb#access_token=t", f"https://h/cb#{_r('access_token=t')}"),
        ("https://h/x?token=&next=2", "https://h/x?token=&next=2"),
        ("/relative?password=p", f"/relative?password={_r('p')}"),
    ],
)
def test_the_url_rule(url: str, stored: str) -> None:
    assert redact_url(url) == stored
    assert redact_url(stored) == stored  # idempotent: a replay of the stored URL matches


def test_the_form_and_header_rules() -> None:
    assert redact_form("grant_type=refresh&refresh_token=r%2B1") == (
        f"grant_type=refresh&refresh_token={_r('r+1')}"
    )
    assert redact_headers(
        [
            ("Authorization", "Bearer k"),
            ("Accept", "application/json"),
            ("Location", "https://u:p@h/next?sig=z"),
        ]
    ) == [
        ("Authorization", _r("Bearer k")),
        ("Accept", "application/json"),
        ("Location", f"https://h/next?sig={_r('z')}"),
    ]


def test_the_json_rule_redacts_scalars_by_name_at_any_depth_and_urls() -> None:
    value = {
        "extra_headers": {"Authorization": "Bearer k", "Idempotency-Key": "i"},
        "extra_body": {"provider": [{"api_key": "k2", "code": 123456, "auth": True}]},
        "schema": {"properties": {"password": {"type": "string"}}, "required": ["password"]},
        "provider_url": "https://ada:pw@h/v1",
        "text": "see https://ada:pw@h/v1 here",
    }
    assert redact_json(value) == {
        "extra_headers": {"Authorization": _r("Bearer k"), "Idempotency-Key": "i"},
        "extra_body": {"provider": [{"api_key": _r("k2"), "code": _r("123456"), "auth": True}]},
        "schema": {"properties": {"password": {"type": "string"}}, "required": ["password"]},
        "provider_url": "https://h/v1",
        "text": "see https://ada:pw@h/v1 here",
    }
    only_urls = redact_json(value, fields=False)
    assert only_urls["extra_headers"] == value["extra_headers"]
    assert only_urls["provider_url"] == "https://h/v1"
    unchanged = {"a": [1, "x"], "b": None}
    assert redact_json(unchanged) is unchanged


def test_the_body_rule_keeps_exact_bytes_unless_a_field_is_secret() -> None:
    exact = b'{ "model": "m",\n "messages": [] }'
    assert redact_body(exact, "application/json") is exact
    secret = b'{"model": "m", "api_key": "k", "n": 1.5}'
    assert redact_body(secret, "application/json; charset=utf-8") == (
        b'{"model":"m","api_key":"' + _r("k").encode() + b'","n":1.5}'
    )
    assert json.loads(redact_body(secret, None))["api_key"] == _r("k")
    form = b"client_id=c&client_secret=s"
    assert redact_body(form, "application/x-www-form-urlencoded") == (
        b"client_id=c&client_secret=" + _r("s").encode()
    )
    assert redact_body(b"password=p", "text/plain") == b"password=p"
    assert redact_body(b"{not json", "application/json") == b"{not json"
    assert redact_body(b"\xff\xfe", "application/json") == b"\xff\xfe"


def test_the_chat_provider_names_its_url_only_redacted() -> None:
    import asyncio

    import httpx

    from toolproof.sources.chat_provider import chat_provider_tool

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="down")

    tool = chat_provider_tool(
        name="llm.chat",
        base_url="https://ada:PW-SECRET@llm.example/v1",
        transport=httpx.MockTransport(answer),
        max_retries=0,
    )
    shown = "https://llm.example/v1"
    assert tool.spec.description == f"Chat Completions at {shown} (the llm reasoner's model)"
    assert tool.source == f"provider:{shown}"
    result = asyncio.run(tool.call({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
    assert result.failure is not None
    assert result.failure.message == (
        "model provider 'llm.chat': HTTP 500 from https://llm.example/v1/chat/completions"
    )
    assert "SECRET" not in json.dumps(result.failure.model_dump(mode="json"))


def test_text_that_may_hold_no_secret_is_told_apart_without_parsing() -> None:
    from toolproof.redaction import may_hold_secret

    assert may_hold_secret(b'{"model":"m","messages":[{"role":"user","content":"5"}]}') is False
    for data in (b'{"API_KEY":1}', b'{"u":"http://h"}', b'{"\\u0061pi_key":"k"}', b"PHPSESSID=1"):
        assert may_hold_secret(data) is True, data


def test_a_pydantic_ai_request_and_its_key_take_the_redacted_form() -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart
    from pydantic_ai.models import ModelRequestParameters

    from toolproof.adapters.frameworks.pydantic_ai_model import request_and_key, request_value
    from toolproof.identity import canonical_json

    messages = [
        ModelRequest.user_text_prompt("Which fruit?"),
        ModelResponse(parts=[TextPart("A pear.")], provider_url="https://ada:PW@h.example/v1"),
    ]
    for settings in (None, {"extra_body": {"api_key": "k"}}):
        value = request_value(messages, settings, ModelRequestParameters())  # type: ignore[arg-type]
        request, key = request_and_key(messages, settings, ModelRequestParameters())  # type: ignore[arg-type]
        assert request == canonical_json(value)
        assert value["messages"][1]["provider_url"] == "https://h.example/v1"
        assert b"PW" not in request and b"PW" not in key
    assert value["model_settings"] == {"extra_body": {"api_key": _r("k")}}
