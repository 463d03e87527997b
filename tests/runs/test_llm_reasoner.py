"""The ``llm`` reasoner against a scripted OpenAI-compatible endpoint (real HTTP on 127.0.0.1).

The endpoint is scripted because these are the faults and replies a real small model
cannot be made to give on demand (429, 500, refusals, exact quotes); the real
llama.cpp server is exercised in ``test_llm_real_server.py``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from llm_support import Reply, answer_reply, chat_reply, scripted_model
from runs_support import Counter, make_toolset, run

from toolproof.bundle.evidence import RunEvidence
from toolproof.contract.runs import RunSpec
from toolproof.errors import InputError, ReplayRefused
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.runs.diff import diff_runs
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run

APPLE = "Report on apple. The apple shelf is full. Nothing else to add."
PLUM = "Report on plum. The plum shelf is full. Nothing else to add."


def llm_spec(base_url: str, **params: Any) -> dict[str, Any]:
    return {
        "task": "Are the shelves full?",
        "steps": [
            {"id": "apple", "tool": "text", "arguments": {"topic": "apple"}},
            {"id": "plum", "tool": "text", "arguments": {"topic": "plum"}},
        ],
        "reasoner": {
            "name": "llm",
            "min_supports": 2,
            "params": {"base_url": base_url, "model": "scripted", "seed": 7, **params},
        },
        "seed": 1,
    }


GOOD = answer_reply(
    "Both shelves are full.",
    [("E1", "The apple shelf is full."), ("E2", "The plum  shelf\nis full.")],
)


def claims(run_dir: Path) -> list[dict[str, Any]]:
    loaded = json.loads((run_dir / "claims.json").read_bytes())
    assert isinstance(loaded, list)
    return loaded


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]


def test_resolved_quotes_are_supports_on_the_original_bytes(tmp_path: Path) -> None:
    with scripted_model(GOOD) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert claim["status"] == "validated"
    assert claim["statement"] == "Both shelves are full."
    assert claim["reasoner"] == "llm/1"
    assert claim["reason"] == "answers 'Are the shelves full?'; 2 of 2 quotes resolved"
    assert [c["text"] for c in claim["citations"]] == [
        "The apple shelf is full.",
        "The plum shelf is full.",  # located whitespace-insensitively, cited as stored
    ]
    for support in claim["supports"]:
        data = RunEvidence.open(outcome.path).read(support["evidence"])
        assert data in (APPLE.encode(), PLUM.encode())
    assert verify_run(outcome.path).ok
    (sent,) = endpoint.requests
    assert sent["path"] == "/v1/chat/completions"
    body = sent["body"]
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == (
        "scripted",
        0.0,
        7,
        512,
    )
    assert body["response_format"]["type"] == "json_schema"
    assert f"[E1]\n{APPLE}" in body["messages"][1]["content"]
    called = [e for e in events(outcome.path) if e["type"] == "tool_called"]
    assert [e["call"]["tool"] for e in called] == ["text", "text", "llm.chat"]
    runtime = json.loads((outcome.path / "runtime.json").read_bytes())
    assert [(p["kind"], p["name"]) for p in runtime["providers"]] == [("model", "llm.chat")]
    assert runtime["reasoner"]["deterministic"] is False
    assert runtime["reasoner"]["varies"] == ["model"]


def test_quotes_that_resolve_nowhere_are_insufficient_evidence_naming_each(
    tmp_path: Path,
) -> None:
    forged = answer_reply(
        "Both shelves are empty.",
        [
            ("E1", "The apple shelf is empty."),
            ("E7", "anything"),
            ("E2", "The plum shelf is full."),
        ],
    )
    with scripted_model(forged) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert claim["status"] == "insufficient_evidence"
    assert claim["supports"] == []
    assert claim["statement"] == "Are the shelves full?"
    evidence_id = next(
        e["evidence"]["id"]
        for e in events(outcome.path)
        if e["type"] == "evidence_registered" and e["step"] == "apple"
    )
    assert claim["reason"] == (
        "the model answered 'Both shelves are empty.' but 1 of 3 quotes resolved, fewer than "
        f"min_supports = 2; unresolved: 'The apple shelf is empty.' is not in E1 ({evidence_id}); "
        "'anything' names 'E7', not shown"
    )
    assert verify_run(outcome.path).ok  # honest: nothing asserted


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (answer_reply(None, []), "the model said the evidence does not answer it"),
        (answer_reply("I don't know.", []), "the model said the evidence does not answer it"),
        (
            chat_reply("The shelves are full, I think."),
            "the model's reply is not the JSON answer asked for: 'The shelves are full, I think.'",
        ),
    ],
)
def test_no_answer_and_malformed_replies_assert_nothing(
    tmp_path: Path, reply: Reply, reason: str
) -> None:
    with scripted_model(reply) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert (claim["status"], claim["reason"]) == ("insufficient_evidence", reason)


@pytest.mark.parametrize(
    ("reply", "kind", "message"),
    [
        (Reply(status=500, body=b'{"error": "boom"}'), "tool_error", "HTTP 500 from"),
        (Reply(body=b"<html>not json</html>"), "invalid_result", "the response body is not JSON"),
        (Reply(body=b'{"choices": []}'), "invalid_result", "has no choices[0].message"),
        (
            chat_reply("", refusal="I can't help with that."),
            "refused",
            "the model refused: I can't help with that.",
        ),
        (chat_reply("", finish="content_filter"), "refused", "the model refused: content_filter"),
        (
            Reply(status=429, body=b"{}", headers={"Retry-After": "0"}),
            "rate_limited",
            "HTTP 429 from",
        ),
    ],
)
def test_provider_failures_are_typed_failures_in_the_trace(
    tmp_path: Path, reply: Reply, kind: str, message: str
) -> None:
    with scripted_model(reply) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    returned = [
        e for e in events(outcome.path) if e["type"] == "tool_returned" and e["step"] == "derive"
    ]
    (failed,) = returned
    assert failed["result"]["failure"]["kind"] == kind
    assert message in failed["result"]["failure"]["message"]
    (claim,) = claims(outcome.path)
    assert claim["status"] == "insufficient_evidence"
    assert claim["reason"].startswith(f"the model call failed ({kind}: ")
    # the failed model call fails the derive step: the run is honest, and not passed
    verification = verify_run(outcome.path)
    assert [(f.check, f.finding.file) for f in verification.failures] == [
        ("required-steps", "trace.jsonl")
    ]
    assert verification.failures[0].finding.message.startswith(f"step 'derive' failed: {kind}: ")


def test_a_429_is_retried_after_retry_after_and_recorded(tmp_path: Path) -> None:
    limited = Reply(status=429, body=b'{"error": "slow down"}', headers={"Retry-After": "0.2"})
    with scripted_model(limited, GOOD) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    assert len(endpoint.requests) == 2
    (claim,) = claims(outcome.path)
    assert claim["status"] == "validated"
    observed = [e for e in events(outcome.path) if e["type"] == "failure_observed"]
    assert [(e["failure"]["kind"], e["recovered_by"]) for e in observed] == [
        ("rate_limited", "llm.chat")
    ]
    assert verify_run(outcome.path).ok


def test_a_slow_endpoint_is_a_timeout(tmp_path: Path) -> None:
    with scripted_model(Reply(body=b"{}", delay=2.0)) as endpoint:
        spec = llm_spec(endpoint.base_url, timeout_seconds=0.3)
        outcome = run(tmp_path, spec, make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert claim["reason"].startswith("the model call failed (timeout: model provider 'llm.chat'")


def test_an_unreachable_endpoint_is_unavailable(tmp_path: Path) -> None:
    with scripted_model(GOOD) as endpoint:
        base_url = endpoint.base_url
    outcome = run(tmp_path, llm_spec(base_url), make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert claim["reason"].startswith("the model call failed (unavailable: ")


def test_the_api_key_is_sent_and_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-SECRET-5f1e2d3c4b5a"
    monkeypatch.setenv("TOOLPROOF_TEST_LLM_KEY", key)
    with scripted_model(GOOD) as endpoint:
        spec = llm_spec(endpoint.base_url, api_key_env="TOOLPROOF_TEST_LLM_KEY")
        outcome = run(tmp_path, spec, make_toolset(Counter()))
    assert endpoint.requests[0]["headers"]["authorization"] == f"Bearer {key}"
    for path in outcome.path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_frozen_replay_serves_the_recorded_response_without_the_network(tmp_path: Path) -> None:
    with scripted_model(GOOD) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
        asked = len(endpoint.requests)
        result = asyncio.run(replay_run(outcome.path))
        assert len(endpoint.requests) == asked  # the endpoint was not asked again
    assert result.identical and result.live_calls == 0
    # and with the endpoint gone entirely
    assert asyncio.run(replay_run(outcome.path)).identical


def test_a_changed_model_refuses_replay_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLPROOF_TEST_LLM_MODEL", "model-a")
    with scripted_model(GOOD) as endpoint:
        spec = llm_spec(endpoint.base_url, model_env="TOOLPROOF_TEST_LLM_MODEL")
        outcome = run(tmp_path, spec, make_toolset(Counter()))
    assert endpoint.requests[0]["body"]["model"] == "model-a"
    monkeypatch.setenv("TOOLPROOF_TEST_LLM_MODEL", "model-b")
    with pytest.raises(ReplayRefused) as info:
        asyncio.run(replay_run(outcome.path))
    assert (
        "step 'derive' calls 'llm.chat' with changed arguments at /model: "
        "recorded 'model-a', now 'model-b'" in info.value.message
    )


def test_a_changed_prompt_refuses_replay_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("prompt.txt").write_text("Answer from the evidence only.", encoding="utf-8")
    with scripted_model(GOOD) as endpoint:
        spec = llm_spec(endpoint.base_url, system_prompt_file="prompt.txt")
        outcome = run(tmp_path, spec, make_toolset(Counter()))
    assert endpoint.requests[0]["body"]["messages"][0]["content"] == (
        "Answer from the evidence only."
    )
    assert asyncio.run(replay_run(outcome.path)).identical
    Path("prompt.txt").write_text("Answer freely.", encoding="utf-8")
    with pytest.raises(ReplayRefused) as info:
        asyncio.run(replay_run(outcome.path))
    assert info.value.message.startswith(
        "frozen replay refused: the reasoner llm/1 changed: "
        "/messages/0/content (system prompt): recorded sha256:"
    )


def test_a_tampered_response_fails_verify(tmp_path: Path) -> None:
    with scripted_model(GOOD) as endpoint:
        outcome = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    response = next(
        e["evidence"]["id"]
        for e in events(outcome.path)
        if e["type"] == "evidence_registered" and e["step"] == "derive"
    )
    assert b"Both shelves" in RunEvidence.open(outcome.path).read(response)
    path = outcome.path / "evidence.pack"  # the response's bytes, changed in the pack
    path.write_bytes(path.read_bytes().replace(b"Both shelves", b"No shelves"))
    verification = verify_run(outcome.path)
    assert not verification.ok
    assert any(failure.finding.file == "evidence.pack" for failure in verification.failures)


def test_two_live_runs_name_the_model_as_what_varies(tmp_path: Path) -> None:
    other = answer_reply(
        "The shelves are full.",
        [("E1", "The apple shelf is full."), ("E2", "The plum shelf is full.")],
    )
    with scripted_model(GOOD) as endpoint:
        first = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
        endpoint.script(other)
        second = run(tmp_path, llm_spec(endpoint.base_url), make_toolset(Counter()))
    diff = diff_runs(first.path, second.path)
    assert diff.varying == {"reasoner llm": ["model"], "tool llm.chat": ["model"]}
    assert diff.first_event is not None and diff.first_event["source"] == "tool llm.chat"
    assert diff.explained


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"base_url": "http://x/v1"},
            "reasoner 'llm' params: model: required (give 'model', or 'model_env' naming",
        ),
        ({"model": "m", "temperature": 3}, "reasoner 'llm' params: temperature: Input should be"),
        ({"model": "m", "max_quotes": 0}, "reasoner 'llm' params: max_quotes: Input should be"),
        ({"model": "m", "api_key": "sk-1"}, "reasoner 'llm' params: api_key: Extra inputs"),
        (
            {"model": "m", "system_prompt_file": "/nonexistent/prompt.txt"},
            "reasoner 'llm' params: system_prompt_file: cannot read '/nonexistent/prompt.txt'",
        ),
    ],
)
def test_bad_params_are_refused_naming_the_key(params: dict[str, Any], message: str) -> None:
    spec = RunSpec.model_validate(
        {"task": "t", "steps": [], "reasoner": {"name": "llm", "params": params}}
    )
    with pytest.raises(InputError) as info:
        reasoner_registry().create(spec.reasoner)
    assert info.value.message.startswith(message)


def test_a_model_env_that_is_unset_is_refused_at_the_call(tmp_path: Path) -> None:
    spec = llm_spec("http://127.0.0.1:9/v1")
    spec["reasoner"]["params"] = {"model_env": "TOOLPROOF_TEST_UNSET_MODEL_VARIABLE"}
    outcome = run(tmp_path, spec, make_toolset(Counter()))
    assert outcome.report.outcome != "passed" or outcome.outcome.failures
    (failure,) = outcome.outcome.failures
    assert failure["reason"] == (
        "reasoner llm/1: reasoner 'llm' params: model_env: the environment variable "
        "TOOLPROOF_TEST_UNSET_MODEL_VARIABLE is not set (and no 'model' is given)"
    )


def test_a_quote_of_a_results_echo_of_its_arguments_is_no_support(tmp_path: Path) -> None:
    """Issue 30 item 8: the ``text`` tool repeats ``topic``; quoting that part supports nothing."""
    invented = "apple. Every apple is made of gold"
    spec = llm_spec("http://unused")
    spec["reasoner"]["min_supports"] = 1
    spec["steps"] = [{"id": "apple", "tool": "text", "arguments": {"topic": invented}}]
    laundered = answer_reply(
        "Apples are gold.", [("E1", "Every apple is made of gold"), ("E1", "is")]
    )
    with scripted_model(laundered) as endpoint:
        spec["reasoner"]["params"]["base_url"] = endpoint.base_url
        outcome = run(tmp_path, spec, make_toolset(Counter()))
    (claim,) = claims(outcome.path)
    assert claim["status"] == "insufficient_evidence"
    assert claim["reason"] == (
        "the model answered 'Apples are gold.' but 0 of 2 quotes resolved, fewer than "
        "min_supports = 1; unresolved: 'Every apple is made of gold' in E1: it repeats an "
        "argument string of that call (rule: a result's echo of its call's own arguments "
        "supports nothing); 'is' in E1: it is 2 characters (rule: a quote shorter than 4 "
        "characters never validates on its own)"
    )
    assert claim["supports"] == []
    assert verify_run(outcome.path).ok  # honest: nothing asserted
