"""The model-turn hot path: each spliced shortcut writes what the long way wrote, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestParameters

from toolproof.adapters.httpx_transport import (
    REQUEST_HEADERS_KEPT,
    RESPONSE_HEADERS_KEPT,
    kept_headers,
    recorded_url,
)
from toolproof.adapters.pydantic_ai_model import request_and_key, request_value
from toolproof.contract.trace import ModelTurn, StepFinished, StepStarted
from toolproof.errors import CanonicalizationError
from toolproof.evidence.pack import read_pack
from toolproof.identity import canonical_json
from toolproof.runs.recorder import Durability, ModelExchange, Recorder
from toolproof.runs.turns import value_key

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
    kept = json.loads(key)
    assert kept["messages"][1]["parts"][0]["args"] == {"item": "pear", "n": 1.5}
    assert kept["model_settings"] == {"temperature": 0.5}


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
def test_a_recorded_url_drops_userinfo_and_redacts_secret_query_values(
    url: str, recorded: str
) -> None:
    assert recorded_url(httpx.URL(url)) == recorded


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
