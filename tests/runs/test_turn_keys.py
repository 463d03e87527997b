"""A recorded turn's match key and recorded URL: what they keep and what they drop."""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters

from toolproof.adapters.frameworks.httpx_transport import (
    recorded_url,
)
from toolproof.adapters.frameworks.pydantic_ai_model import request_and_key, request_value
from toolproof.identity import canonical_json
from toolproof.runs.turns import value_key


def test_a_pydantic_ai_request_key_drops_the_per_call_fields() -> None:
    messages = [
        ModelRequest.user_text_prompt("Which fruit is 7?"),
        ModelResponse(parts=[ToolCallPart("lookup", {"item": "pear", "n": 1.5})]),
        ModelResponse(parts=[TextPart("It is a pear.")]),
    ]
    value = request_value(messages, {"temperature": 0.5}, ModelRequestParameters())
    before = json.loads(canonical_json(value))
    request, key = request_and_key(messages, {"temperature": 0.5}, ModelRequestParameters())
    assert request == canonical_json(value)
    assert b'"timestamp"' in request
    assert b'"timestamp"' not in key and b'"run_id"' not in key
    assert key == value_key("pydantic-ai", value)
    assert json.loads(canonical_json(value)) == before  # the value itself is not changed
    kept = json.loads(key)  # the provider-neutral normal form (docs/agents.md, Replay matching)
    assert sorted(kept) == ["messages", "other", "output", "settings", "tools"]
    assert kept["messages"][0] == {"content": "Which fruit is 7?", "role": "user"}
    call = kept["messages"][1]["tool_calls"][0]
    assert (call["name"], call["arguments"]) == ("lookup", {"item": "pear", "n": 1.5})
    assert kept["messages"][2] == {"content": "It is a pear.", "role": "assistant"}
    assert kept["settings"] == {"temperature": 0.5}


@pytest.mark.parametrize(
    ("url", "recorded"),
    [
        (
            "https://api.openai.com/v1/chat/completions",
            "https://api.openai.com/v1/chat/completions",
        ),
        (  # userinfo removed; a secret value redacted with its digest (issue 30 item 3)
            "https://u:p@h.example/v1?key=s3&a=1",
            "https://h.example/v1?key=REDACTED:sha256:41242b9fae56fad4&a=1",
        ),
        (  # names any case; the other pairs keep their exact bytes (a bare "b" too)
            "http://h.example/x?API_KEY=1&sig=2&b",
            "http://h.example/x?API_KEY=REDACTED:sha256:6b86b273ff34fce1"
            "&sig=REDACTED:sha256:d4735e3a265e16ee&b",
        ),
        (  # a fragment is redacted whole
            "http://h.example/a%20b?q=%C3%A9#frag",
            "http://h.example/a%20b?q=%C3%A9#REDACTED:sha256:b45df01cf1aea7fa",
        ),
        ("http://h.example/a%20b?q=%C3%A9", "http://h.example/a%20b?q=%C3%A9"),
    ],
)
def test_a_recorded_url_drops_userinfo_and_redacts_secret_query_values(
    url: str, recorded: str
) -> None:
    assert recorded_url(httpx.URL(url)) == recorded
