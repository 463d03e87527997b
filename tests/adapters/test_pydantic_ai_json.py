"""The lean serializers of pydantic-ai messages and responses dump what its adapters dump."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.usage import RequestUsage

from toolproof.adapters import pydantic_ai_json
from toolproof.adapters.pydantic_ai_json import (
    RESPONSE_ADAPTER,
    lean,
    messages_json,
    response_json,
)
from toolproof.adapters.pydantic_ai_model import request_bytes, response_bytes

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
WHEN = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
BINARY = st.builds(
    BinaryContent, st.binary(max_size=6), media_type=st.sampled_from(["image/png", "text/plain"])
)
IMAGE = st.builds(ImageUrl, st.just("https://example.com/pear.png"))
USER_CONTENT = TEXT | st.lists(TEXT | BINARY | IMAGE, max_size=3) | st.tuples(TEXT, BINARY)
REQUEST_PART = st.one_of(
    st.builds(UserPromptPart, USER_CONTENT, timestamp=WHEN),
    st.builds(SystemPromptPart, TEXT, timestamp=WHEN),
    st.builds(
        ToolReturnPart,
        TEXT,
        JSON | st.binary(max_size=4) | st.lists(TEXT | BINARY, max_size=2),
        TEXT,
        timestamp=WHEN,
        outcome=st.sampled_from(["success", "failed", "retried"]),
    ),
)
RESPONSE_PART = st.one_of(
    st.builds(TextPart, TEXT, id=st.none() | TEXT),
    st.builds(ToolCallPart, TEXT, st.none() | TEXT | st.dictionaries(TEXT, JSON, max_size=3), TEXT),
    st.builds(ThinkingPart, TEXT, signature=st.none() | TEXT),
)
EXTRA = st.dictionaries(st.sampled_from(["pear_tokens", "apple_ms"]), st.integers(0, 9), max_size=2)


@st.composite
def usages(draw: st.DrawFn) -> RequestUsage:
    """A usage, sometimes given attributes beyond its fields (the adapter dumps those too)."""
    usage = RequestUsage(
        input_tokens=draw(st.integers(0, 10**6)),
        output_tokens=draw(st.integers(0, 10**6)),
        details=draw(st.dictionaries(TEXT, st.integers(0, 99), max_size=2)),
        audio_seconds=draw(st.floats() | st.sampled_from([math.inf, -math.inf, math.nan])),
    )
    for name, value in draw(EXTRA).items():
        setattr(usage, name, value)
    return usage


def _parts(part: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(part, max_size=3) | st.lists(part, max_size=3).map(tuple)


RESPONSES = st.builds(
    ModelResponse,
    _parts(RESPONSE_PART),
    usage=usages(),
    model_name=st.none() | TEXT,
    timestamp=WHEN,
    provider_details=st.none() | st.dictionaries(TEXT, JSON, max_size=2),
)
REQUESTS = st.builds(
    ModelRequest,
    _parts(REQUEST_PART),
    timestamp=st.none() | WHEN,
    instructions=st.none() | TEXT,
    run_id=st.none() | TEXT,
)
MESSAGES = st.lists(REQUESTS | RESPONSES, max_size=4)


def _exact(value: Any) -> str:
    """JSON text keeping the dict order: equal strings mean equal values, key order included."""
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(MESSAGES)
def test_messages_dump_as_the_adapter_dumps_them(messages: list[ModelMessage]) -> None:
    assert _exact(messages_json(messages)) == _exact(
        ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    )


@settings(max_examples=300, deadline=None)
@given(RESPONSES)
def test_a_response_dumps_as_the_adapter_dumps_it(response: ModelResponse) -> None:
    assert _exact(response_json(response)) == _exact(
        RESPONSE_ADAPTER.dump_python(response, mode="json")
    )


def test_the_pinned_pydantic_ai_gets_both_lean_serializers() -> None:
    assert lean() == (True, True)


@pytest.mark.parametrize(
    ("adapter", "replaced"),
    [
        (
            ModelMessagesTypeAdapter,
            {(ModelRequest, "parts"), (ModelResponse, "parts"), (ModelResponse, "usage")},
        ),
        (RESPONSE_ADAPTER, {(ModelResponse, "parts"), (ModelResponse, "usage")}),
    ],
)
def test_the_rewrite_replaces_the_callbacks_of_parts_and_usage_only(
    adapter: TypeAdapter[Any], replaced: set[tuple[type, str]]
) -> None:
    adapter.rebuild()
    found: set[tuple[type, str]] = set()
    pydantic_ai_json._rewrite(adapter.core_schema, None, None, found)
    assert found == replaced


class _Counting:
    """A stand-in lean dump that counts its calls and answers as the real one."""

    def __init__(self, dump: Any) -> None:
        self.dump = dump
        self.calls = 0

    def __call__(self, value: Any, **options: Any) -> Any:
        self.calls += 1
        return self.dump(value, **options)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> _Counting:
    dumps = pydantic_ai_json._DUMPS
    if not dumps.built:
        dumps.build()
    counting = _Counting(getattr(dumps, name))
    monkeypatch.setattr(dumps, name, counting)
    return counting


def test_a_plain_turn_takes_the_lean_serializers(monkeypatch: pytest.MonkeyPatch) -> None:
    messages_lean = _counting(monkeypatch, "messages_lean")
    response_lean = _counting(monkeypatch, "response_lean")
    response = ModelResponse(parts=[TextPart("It is a pear.")])
    messages_json([ModelRequest.user_text_prompt("Which fruit?"), response])
    response_json(response)
    assert (messages_lean.calls, response_lean.calls) == (1, 1)


@pytest.mark.parametrize(
    "why",
    ["tuple of parts", "usage with an extra attribute", "usage of a subclass", "message subclass"],
)
def test_what_the_lean_serializers_rely_on_not_holding_goes_to_the_adapter(
    monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    messages_lean = _counting(monkeypatch, "messages_lean")
    response_lean = _counting(monkeypatch, "response_lean")

    @dataclasses.dataclass(repr=False)
    class TaggedResponse(ModelResponse):
        tag: str = "t"

    class MeteredUsage(RequestUsage):
        pass

    response: ModelResponse = ModelResponse(parts=[TextPart("It is a pear.")])
    if why == "tuple of parts":
        response = ModelResponse(parts=(TextPart("It is a pear."),))
    elif why == "usage with an extra attribute":
        response.usage.pear_tokens = 3  # type: ignore[attr-defined]
    elif why == "usage of a subclass":
        response = ModelResponse(parts=[TextPart("It is a pear.")], usage=MeteredUsage())
    else:
        response = TaggedResponse(parts=[TextPart("It is a pear.")])
    messages: list[ModelMessage] = [ModelRequest.user_text_prompt("Which fruit?"), response]
    assert _exact(messages_json(messages)) == _exact(
        ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    )
    assert _exact(response_json(response)) == _exact(
        RESPONSE_ADAPTER.dump_python(response, mode="json")
    )
    assert (messages_lean.calls, response_lean.calls) == (0, 0)
    if why == "usage with an extra attribute":
        assert response_json(response)["usage"]["pear_tokens"] == 3


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(depth):
        inner["a"] = {}
        inner = inner["a"]
    return value


def _outcome(work: Any) -> tuple[Any, str]:
    """``("ok", the value as exact JSON text)``, or the type and text of what ``work()`` raised."""
    try:
        return "ok", _exact(work())
    except Exception as exc:
        return type(exc), str(exc)


def _cycle() -> dict[str, Any]:
    args: dict[str, Any] = {}
    args["self"] = args
    return args


@pytest.mark.parametrize(
    "part",
    [
        ToolCallPart("t", {"b": b"\xff"}),  # not UTF-8 (the messages adapter: base64)
        ToolCallPart("t", _cycle()),  # a circular reference
        ToolCallPart("t", _deep(300)),  # past pydantic's serialization depth
        TextPart(1),  # type: ignore[arg-type]  # a wrong type warns: an error under pytest
    ],
)
def test_a_dump_the_adapter_refuses_raises_the_adapters_error(part: Any) -> None:
    response = ModelResponse(parts=[part])
    refused = _outcome(lambda: RESPONSE_ADAPTER.dump_python(response, mode="json"))
    assert refused[0] != "ok"  # the adapter refuses it
    assert _outcome(lambda: response_json(response)) == refused
    messages: list[ModelMessage] = [ModelRequest.user_text_prompt("Which fruit?"), response]
    assert _outcome(lambda: messages_json(messages)) == _outcome(
        lambda: ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    )


@pytest.mark.parametrize("depth", [253, 254])
def test_a_turn_nested_where_only_the_lean_dump_succeeds_fails_as_the_adapter_does(
    depth: int,
) -> None:
    """The lean dump goes two levels deeper; canonical JSON refuses it, the adapter decides."""
    response = ModelResponse(parts=[ToolCallPart("t", _deep(depth))])
    response_json(response)  # the lean dump itself succeeds here
    with pytest.raises(ValueError, match="Maximum serialization depth exceeded"):
        RESPONSE_ADAPTER.dump_python(response, mode="json")
    with pytest.raises(ValueError, match="Maximum serialization depth exceeded"):
        response_bytes(response)
    messages: list[ModelMessage] = [ModelRequest.user_text_prompt("Which fruit?"), response]
    with pytest.raises(ValueError, match="Maximum serialization depth exceeded"):
        request_bytes(messages, None, ModelRequestParameters())


def test_a_non_finite_usage_float_is_recorded_as_the_adapter_dumps_it() -> None:
    response = ModelResponse(parts=[TextPart("x")], usage=RequestUsage(audio_seconds=math.inf))
    assert response_json(response)["usage"]["audio_seconds"] is None
    assert messages_json([response])[0]["usage"]["audio_seconds"] is None
    assert b'"audio_seconds":null' in response_bytes(response)
