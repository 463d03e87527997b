"""The model-turn hot path: each spliced shortcut writes what the long way wrote, byte for byte."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters

from toolproof.adapters import httpx_transport
from toolproof.adapters.httpx_transport import (
    REQUEST_HEADERS_KEPT,
    RESPONSE_HEADERS_KEPT,
    kept_headers,
    recorded_url,
)
from toolproof.adapters.pydantic_ai_model import request_value
from toolproof.contract.trace import ModelTurn, StepFinished, StepStarted
from toolproof.errors import CanonicalizationError
from toolproof.evidence.pack import read_pack
from toolproof.identity import canonical_json
from toolproof.runs.recorder import Durability, ModelExchange, Recorder
from toolproof.runs.turns import pydantic_ai_request, value_key

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
"""Any Unicode text without lone surrogates (quotes, controls, astral characters...)."""
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
PER_CALL = st.sampled_from(["timestamp", "run_id", "conversation_id", "kind", "content"])
PART = st.one_of(st.dictionaries(PER_CALL | TEXT, JSON, max_size=4), JSON)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"parts": st.one_of(st.lists(PART, max_size=3), JSON)},
        optional={"timestamp": JSON, "run_id": JSON, "conversation_id": JSON, "kind": TEXT},
    ),
    st.dictionaries(PER_CALL | TEXT, JSON, max_size=3),
    JSON,
)


def _value(messages: Any, settings_value: Any, parameters: Any) -> dict[str, Any]:
    return {"messages": messages, "model_settings": settings_value, "parameters": parameters}


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(MESSAGE, max_size=4), JSON), JSON, JSON)
def test_the_spliced_pydantic_ai_request_and_key_equal_the_long_way(
    messages: Any, settings_value: Any, parameters: Any
) -> None:
    value = _value(messages, settings_value, parameters)
    before = copy.deepcopy(value)
    expected = _outcome(lambda: (canonical_json(before), value_key("pydantic-ai", before)))
    assert _outcome(lambda: pydantic_ai_request(value)) == expected
    assert value == before  # nothing of the caller's value was changed
    spent = copy.deepcopy(value)
    assert _outcome(lambda: pydantic_ai_request(spent, spend=True)) == expected


def _outcome(work: Any) -> Any:
    """What ``work()`` returns, or the type and text of what it raises (messages of 1)."""
    try:
        return work()
    except (TypeError, CanonicalizationError) as exc:
        return type(exc), str(exc)


def test_a_real_pydantic_ai_request_splices_to_the_long_way() -> None:
    messages = [
        ModelRequest.user_text_prompt("Which fruit is 7?"),
        ModelResponse(parts=[ToolCallPart("lookup", {"item": "pear", "n": 1.5})]),
        ModelResponse(parts=[TextPart("It is a pear.")]),
    ]
    value = request_value(messages, {"temperature": 0.5}, ModelRequestParameters())
    request, key = pydantic_ai_request(value)
    assert request == canonical_json(value)
    assert key == value_key("pydantic-ai", value)
    assert b'"timestamp"' in request
    assert b'"timestamp"' not in key
    assert pydantic_ai_request(value, spend=True) == (request, key)
    assert "timestamp" not in value["messages"][0]["parts"][0]  # spent: dropped in place


class _Parts(list[Any]):
    """A list of another type (its parts are keyed from a copy)."""


@pytest.mark.parametrize(
    "messages",
    [
        [OrderedDict(timestamp=1, run_id=2, parts=[{"timestamp": 3, "x": 4}])],
        [{"timestamp": 1, "parts": [OrderedDict(timestamp=3, x=4), {"timestamp": 5}]}],
        [{"run_id": 1, "parts": [{"timestamp": 2}]}, {"parts": _Parts([{"timestamp": 3}])}],
        [{"conversation_id": 1, "parts": ({"timestamp": 2},)}, "text", 7],
    ],
)
def test_a_spent_request_of_other_mapping_and_list_types_fails_as_the_long_way(
    messages: list[Any],
) -> None:
    value = _value(messages, None, {"p": 1})
    expected = _outcome(lambda: (canonical_json(value), value_key("pydantic-ai", value)))
    assert expected[0] is CanonicalizationError  # the request's encoding refuses them first
    assert _outcome(lambda: pydantic_ai_request(copy.deepcopy(value), spend=True)) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [], "parameters": {}, "model_settings": None},  # another member order
        {"messages": [], "model_settings": None},
        {"messages": None, "model_settings": None, "parameters": {}},
        {"messages": ({"timestamp": 1, "parts": []},), "model_settings": 1, "parameters": 2},
    ],
)
def test_other_shapes_take_the_long_way(value: dict[str, Any]) -> None:
    expected = _outcome(lambda: (canonical_json(value), value_key("pydantic-ai", value)))
    assert _outcome(lambda: pydantic_ai_request(value)) == expected


@pytest.mark.parametrize(
    "value",
    [
        _value([{"parts": [float("nan")]}], None, {"x": float("inf")}),
        _value([], {"a": [float("nan")]}, None),
        _value([], None, {"deep": [1, {"x": float("-inf")}]}),
    ],
)
def test_a_value_with_no_canonical_form_fails_as_the_long_way(value: dict[str, Any]) -> None:
    with pytest.raises(CanonicalizationError) as expected:
        canonical_json(value)
    with pytest.raises(CanonicalizationError) as spliced:
        pydantic_ai_request(value)
    assert str(spliced.value) == str(expected.value)
    assert spliced.value.path == expected.value.path


def _reference_model_step(recorder: Recorder, step: str, turn: ModelExchange) -> None:
    """The model step as the recorder wrote it before its lines were spliced (register + emit)."""
    recorder.emit(StepStarted, step=step, kind="model")
    request = recorder.register_json(
        step, turn.request, turn.request_media_type, "model_request", None, {}
    )
    response = recorder.register_json(
        step, turn.response, turn.response_media_type, "model_response", None, {}
    )
    recorder.emit(
        ModelTurn,
        step=step,
        source=turn.source,
        model=turn.model,
        request=request["id"],
        response=response["id"],
        key=turn.key,
        detail=turn.detail,
    )
    detail = {"evidence": [request["id"], response["id"]]}
    recorder.emit(StepFinished, step=step, status="ok", detail=detail)


def _turns(draw: st.DrawFn) -> list[ModelExchange]:
    bodies = st.sampled_from([b"", b"{}", b"same", "é\u2028\"'".encode()]) | st.binary(max_size=20)
    out = []
    for _ in range(draw(st.integers(1, 3))):
        out.append(
            ModelExchange(
                source=draw(st.sampled_from(["pydantic-ai", "openai-agents", "http"])),
                model=draw(TEXT),
                request=draw(bodies),
                response=draw(bodies),
                key=draw(TEXT | st.just("sha256:" + "0" * 64)),
                request_media_type=draw(st.just("application/json") | TEXT),
                response_media_type=draw(st.just("text/plain; charset=utf-8") | TEXT),
                detail=draw(st.dictionaries(TEXT, JSON, max_size=3)),
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(st.composite(_turns)(), st.sampled_from(list(Durability)), TEXT)
def test_a_spliced_model_step_writes_the_reference_lines_and_evidence(
    tmp_path_factory: pytest.TempPathFactory,
    turns: list[ModelExchange],
    durability: Durability,
    step_prefix: str,
) -> None:
    spliced = tmp_path_factory.mktemp("spliced")
    reference = tmp_path_factory.mktemp("reference")
    live = tmp_path_factory.mktemp("live")
    fast, slow, recordless = (
        Recorder(spliced, durability=durability),
        Recorder(reference, durability=durability),
        Recorder(live, durability=durability),
    )
    returned = []
    for number, turn in enumerate(turns, 1):
        step = f"{step_prefix}{number}"
        returned += fast.model_step(step, turn)
        _reference_model_step(slow, step, turn)
        assert recordless.live_model_step(step, turn) is None
        for recorder in (fast, slow, recordless):
            recorder.commit()
    assert fast.close(sync=False) == slow.close(sync=False) == recordless.close(sync=False)
    trace = (spliced / "trace.jsonl").read_bytes()
    assert trace == (reference / "trace.jsonl").read_bytes() == (live / "trace.jsonl").read_bytes()
    registered = [json.loads(line) for line in trace.splitlines()]
    assert [canonical_json(record) for record in returned] == [
        canonical_json(event["evidence"])
        for event in registered
        if event["type"] == "evidence_registered"
    ]
    if durability == Durability.COMMIT:
        assert _files(spliced) == _files(reference) == _files(live)
    else:
        assert (
            (spliced / "evidence.pack").read_bytes()
            == (reference / "evidence.pack").read_bytes()
            == (live / "evidence.pack").read_bytes()
        )
        assert read_pack(spliced / "evidence.pack").problem is None


def _files(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / "evidence").iterdir())}


def test_a_model_block_inside_a_staged_step_and_with_on_event_is_the_reference(
    tmp_path: Path,
) -> None:
    turn = ModelExchange(
        source="http",
        model='POST "http://x/é"',
        request=b'{"q":1}',
        response=b"ok",
        key="sha256:" + "1" * 64,
        request_media_type="application/json",
        response_media_type='text/plain; charset="utf-8"',
        detail={"status": 200, "url": "http://x/é"},
    )
    seen: list[Any] = []
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    watched = Recorder(tmp_path / "a", durability=Durability.EACH, on_event=seen.append)
    plain = Recorder(tmp_path / "b", durability=Durability.EACH)
    watched.model_step("turn-00000001", turn)
    watched.model_block("turn-00000002", turn)  # not staged: each line put at once
    _reference_model_step(plain, "turn-00000001", turn)
    assert [type(e).__name__ for e in seen] == [
        "StepStarted",
        "EvidenceRegistered",
        "EvidenceRegistered",
        "ModelTurn",
        "StepFinished",
        "EvidenceRegistered",
        "EvidenceRegistered",
        "ModelTurn",
    ]
    watched.close(sync=False)
    plain.close(sync=False)
    lines = (tmp_path / "a" / "trace.jsonl").read_bytes().splitlines()
    assert lines[:5] == (tmp_path / "b" / "trace.jsonl").read_bytes().splitlines()
    for line, event in zip(lines, seen, strict=True):
        assert canonical_json(event.to_json()) == line


@pytest.mark.parametrize(
    ("url", "recorded"),
    [
        (
            "https://api.openai.com/v1/chat/completions",
            "https://api.openai.com/v1/chat/completions",
        ),
        ("https://u:p@h.example/v1?key=s3&a=1", "https://h.example/v1?key=REDACTED&a=1"),
        (
            "http://h.example/x?API_KEY=1&sig=2&b",
            "http://h.example/x?API_KEY=REDACTED&sig=REDACTED&b=",
        ),
        ("http://h.example/a%20b?q=%C3%A9#frag", "http://h.example/a%20b?q=%C3%A9#frag"),
    ],
)
def test_recorded_urls_are_remembered_as_first_computed(url: str, recorded: str) -> None:
    httpx_transport._RECORDED_URLS.clear()
    assert recorded_url(httpx.URL(url)) == recorded
    assert {str(httpx.URL(url)): recorded} == httpx_transport._RECORDED_URLS
    assert recorded_url(httpx.URL(url)) == recorded  # served from the table
    assert httpx_transport._recorded_url(str(httpx.URL(url))) == recorded


def test_the_recorded_url_table_is_bounded() -> None:
    httpx_transport._RECORDED_URLS.clear()
    for n in range(httpx_transport._RECORDED_URLS_KEPT + 3):
        recorded_url(httpx.URL(f"http://h.example/{n}?token=x"))
    assert len(httpx_transport._RECORDED_URLS) == 3
    assert httpx_transport._RECORDED_URLS["http://h.example/258?token=x"] == (
        "http://h.example/258?token=REDACTED"
    )


HEADER_NAMES = st.sampled_from(
    ["content-type", "Content-Type", "CONTENT-TYPE", "accept", "x-request-id", "authorization"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(HEADER_NAMES, st.text('ab; =/"é', max_size=8)), max_size=5))
def test_a_media_type_from_the_kept_headers_is_the_content_type_header(
    pairs: list[tuple[str, str]],
) -> None:
    headers = httpx.Headers([(k, v.encode("utf-8")) for k, v in pairs])
    for allowed in (REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT):
        kept = kept_headers(headers, allowed).get("content-type") or "application/octet-stream"
        assert kept == (headers.get("content-type") or "application/octet-stream")


@pytest.mark.parametrize(
    "fields",
    [
        {"source": "http", "model": "POST u", "request": b"q", "response": b"a", "key": "k"},
        {
            "source": "pydantic-ai",
            "model": "m",
            "request": b"",
            "response": b"{}",
            "key": "sha256:" + "2" * 64,
            "request_media_type": "text/plain",
            "response_media_type": "application/octet-stream",
            "detail": {"status": 200},
        },
    ],
)
def test_a_built_exchange_is_the_constructed_one(fields: dict[str, Any]) -> None:
    built, constructed = ModelExchange.built(**fields), ModelExchange(**fields)
    assert built == constructed
    assert vars(built) == vars(constructed)
    assert repr(built) == repr(constructed)
    assert dataclasses.asdict(built) == dataclasses.asdict(constructed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.key = "other"  # type: ignore[misc]
    assert ModelExchange.built(**fields).detail is not ModelExchange.built(**fields).detail or (
        "detail" in fields
    )


def test_kept_headers_of_any_allow_list_drop_the_secrets() -> None:
    headers = httpx.Headers([("Authorization", "b"), ("X-A", "1"), ("x-a", "2"), ("Accept", "j")])
    assert kept_headers(headers, ("x-a", "authorization", "accept")) == {
        "x-a": "1, 2",
        "accept": "j",
    }
    assert kept_headers(headers, REQUEST_HEADERS_KEPT) == {"accept": "j"}
    assert kept_headers(headers, RESPONSE_HEADERS_KEPT) == {}


def test_a_chained_model_step_whose_bodies_cannot_be_stored_records_its_start_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(tmp_path, durability=Durability.EACH)
    assert recorder.store.pack is not None
    turn = ModelExchange("http", "POST u", b"q", b"a", "sha256:" + "3" * 64)

    def refuse(*items: bytes) -> tuple[int, int]:
        raise OSError(28, "No space left on device", str(tmp_path / "evidence.pack"))

    monkeypatch.setattr(recorder.store.pack, "append_pair", refuse)
    with pytest.raises(OSError, match="No space left on device"):
        recorder.model_step("turn-00000001", turn)
    recorder.commit()
    assert recorder.store.stored_bytes == len(b"toolproof-evidence-pack 1\n")
    assert "evidence_" + "0" * 64 not in recorder.store
    lines = (tmp_path / "trace.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["step_started"]
    assert json.loads(lines[0])["kind"] == "model"
    recorder.close(sync=False)


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "\ud800"},  # a lone surrogate: no canonical form, the general path's error
        {"detail": {"x": float("nan")}},
        {"request_media_type": "\udfff"},
    ],
)
def test_a_turn_the_chained_step_declines_fails_as_the_general_path(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    base: dict[str, Any] = {
        "source": "http",
        "model": "m",
        "request": b"q",
        "response": b"a",
        "key": "k",
    }
    turn = ModelExchange(**{**base, **fields})
    outcomes = []
    for name in ("chained", "reference"):
        (tmp_path / name).mkdir()
        recorder = Recorder(tmp_path / name, durability=Durability.EACH)
        with pytest.raises(CanonicalizationError) as raised:
            if name == "chained":
                recorder.model_step("s", turn)
            else:
                _reference_model_step(recorder, "s", turn)
        recorder.commit()
        recorder.close(sync=False)
        outcomes.append(
            (
                str(raised.value),
                (tmp_path / name / "trace.jsonl").read_bytes(),
                (tmp_path / name / "evidence.pack").read_bytes(),
            )
        )
    assert outcomes[0] == outcomes[1]


def _kept_the_long_way(headers: httpx.Headers, allowed: tuple[str, ...]) -> dict[str, str]:
    """:func:`kept_headers` as it was before ASCII headers were read as raw bytes."""
    wanted = frozenset(allowed) - httpx_transport.SECRET_HEADERS
    out: dict[str, str] = {}
    for name, value in headers.multi_items():
        name = name.lower()
        if name in wanted:
            out[name] = f"{out[name]}, {value}" if name in out else value
    return {name: out[name] for name in allowed if name in out}


RAW_NAMES = st.sampled_from(
    [b"Content-Type", b"ACCEPT", b"x-request-id", b"Authorization", b"Content-Length",
     b"content-encoding", b"Transfer-Encoding", b"X-K\xc3\xa9", b"\xe2\x84\xaaey", b"request-id"]
)  # fmt: skip
RAW_VALUES = st.sampled_from([b"", b"a", b"application/json", b"caf\xc3\xa9", b"\xff\xfe", b"1, 2"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(RAW_NAMES, RAW_VALUES), max_size=6),
    st.sampled_from(
        [REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT, ("x-ké", "kelvin", "accept", "key")]
    ),
)
def test_kept_and_served_headers_are_the_long_way(
    pairs: list[tuple[bytes, bytes]], allowed: tuple[str, ...]
) -> None:
    headers = httpx.Headers(pairs)
    assert kept_headers(headers, allowed) == _kept_the_long_way(httpx.Headers(pairs), allowed)
    served = httpx_transport._served_headers(headers)
    try:
        long_way = httpx.Headers(
            [
                (k, v)
                for k, v in httpx.Headers(pairs).multi_items()
                if k.lower() not in httpx_transport._UNSERVED
            ]
        )
    except UnicodeEncodeError:  # the long way could not hand such headers on at all
        assert headers.encoding != "ascii"
        return
    assert httpx.Headers(served).raw == long_way.raw
    assert httpx.Headers(served).multi_items() == long_way.multi_items()


def test_this_httpx_builds_the_served_response_directly() -> None:
    assert httpx_transport._BUILDS_READ is True


def _state(response: httpx.Response) -> dict[str, Any]:
    """Everything a served response holds but its stream and chosen decoder, headers' included."""
    state = {
        k: v for k, v in vars(response).items() if k not in httpx_transport._READ_STATE_NOT_COMPARED
    }
    state["headers"] = dict(vars(response.headers))  # the pairs, and the encoding worked out
    return state


@settings(max_examples=200, deadline=None)
@given(
    st.integers(100, 599),
    st.lists(st.tuples(RAW_NAMES, RAW_VALUES), max_size=5),
    st.binary(max_size=40),
    st.dictionaries(st.sampled_from(["http_version", "reason_phrase"]), st.binary(max_size=8)),
)
def test_the_served_response_is_the_one_httpx_builds_from_content(
    status: int,
    pairs: list[tuple[bytes, bytes]],
    body: bytes,
    extensions: dict[str, Any],
) -> None:
    request = httpx.Request("POST", "http://127.0.0.1:8031/v1/chat/completions", content=b"{}")
    served = httpx_transport._served_headers(httpx.Headers(pairs))
    built = httpx_transport._read_response(
        status, served, body, request, dict(extensions), direct=True
    )
    constructed = httpx.Response(
        status, headers=served, content=body, request=request, extensions=dict(extensions)
    )
    assert _state(built) == _state(constructed)
    assert (built.content, built.is_closed, built.is_stream_consumed) == (body, True, True)
    assert list(built.iter_bytes()) == list(constructed.iter_bytes())
    with pytest.raises(httpx.StreamConsumed):
        list(built.iter_raw())


def test_a_header_set_on_the_served_response_is_encoded_as_on_the_constructed_one() -> None:
    """The headers' encoding is worked out as the constructor's read works it out."""
    request = httpx.Request("POST", "http://127.0.0.1:8031/v1/chat/completions", content=b"{}")

    def set_header(raw: list[tuple[bytes, bytes]], direct: bool) -> Any:
        response = httpx_transport._read_response(200, raw, b"{}", request, {}, direct=direct)
        try:
            response.headers["x-note"] = "café"
        except UnicodeEncodeError as exc:
            return exc.reason
        return response.headers.raw[-1], response.headers["x-note"]

    ascii_only, latin_1 = [(b"content-type", b"application/json")], [(b"x-b", b"\xe9")]
    expected = ["ordinal not in range(128)", ((b"x-note", b"caf\xe9"), "café")]
    assert [set_header(raw, direct=True) for raw in (ascii_only, latin_1)] == expected
    assert [set_header(raw, direct=False) for raw in (ascii_only, latin_1)] == expected
