"""Model turns match on a provider-neutral normal form, not on a framework's dump.

A release of pydantic-ai or of the Agents SDK that adds a field with a default value to
any of its objects leaves the normal form, so the match key, as it was; a request that
asks the model something else does not. Each framework turn records the framework's
version, and a refusal names both when they differ.
"""

from __future__ import annotations

import asyncio
import copy
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from presented_support import record, toolset

import toolproof
from toolproof.bundle.evidence import RunEvidence
from toolproof.runs.normal_form import framework_detail, normal_form, version_change
from toolproof.runs.turns import turn_key, value_key

V0 = Path(__file__).resolve().parents[1] / "fixtures" / "agent_runs_v0" / "runs"
V0_PYDANTIC_AI = V0 / "run_9396a19f6c4611d1585283d547cd382415635e4e6797d508671aa0561b46245b"
LOOKUP = {
    "additionalProperties": False,
    "properties": {"item": {"type": "string"}},
    "required": ["item"],
    "type": "object",
}


def _turns(run: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each recorded turn's request (parsed) and detail, in trace order."""
    evidence = RunEvidence.open(run)
    out = []
    for line in (run / "trace.jsonl").read_bytes().splitlines():
        event = json.loads(line)
        if event["type"] == "model_turn":
            out.append((json.loads(evidence.read(event["request"])), event["detail"]))
    return out


def test_a_committed_pydantic_ai_request_has_this_normal_form() -> None:
    (first, _), (second, _) = _turns(V0_PYDANTIC_AI)
    assert normal_form("pydantic-ai", first) == {
        "messages": [{"role": "user", "content": "Who created README.md?"}],
        "tools": [
            {
                "name": "lookup",
                "description": "Look an item up.",
                "parameters": LOOKUP,
                "strict": False,
            },
            {
                "name": "read_file",
                "description": "Read a file of the repository.",
                "parameters": {
                    **LOOKUP,
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
                "strict": False,
            },
        ],
        "settings": {},
        "output": {"output_mode": "text", "allow_text_output": True},
        "other": {},
    }
    assert normal_form("pydantic-ai", second)["messages"] == [
        {"role": "user", "content": "Who created README.md?"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "name": "read_file", "arguments": {"path": "README.md"}}],
        },
        {
            "role": "tool",
            "content": "toolproof records every tool call.\nCreated by Ada.",
            "tool_call_id": "a",
            "name": "read_file",
        },
    ]


def test_fields_a_new_release_adds_with_defaults_leave_the_key_as_it_was() -> None:
    (_, _), (request, _) = _turns(V0_PYDANTIC_AI)
    newer = copy.deepcopy(request)
    newer["parameters"]["streaming_hint"] = None
    newer["parameters"]["function_tools"][0]["new_flag"] = False
    newer["messages"][0]["provenance"] = []
    newer["messages"][0]["parts"][0]["cache_point"] = {}
    newer["messages"][1]["usage"] = {"input_tokens": 7}  # an earlier response's bookkeeping
    newer["messages"][1]["timestamp"] = "2030-01-01T00:00:00Z"
    newer["model_settings"] = {"temperature": None}
    assert value_key("pydantic-ai", newer) == value_key("pydantic-ai", request)
    asked_otherwise = copy.deepcopy(request)
    asked_otherwise["parameters"]["function_tools"][0]["description"] = "Look it up."
    assert value_key("pydantic-ai", asked_otherwise) != value_key("pydantic-ai", request)
    warmer = copy.deepcopy(request)
    warmer["model_settings"] = {"temperature": 0}  # a setting that is set: 0 is not unset
    assert value_key("pydantic-ai", warmer) != value_key("pydantic-ai", request)


def test_an_agents_sdk_request_matches_on_its_normal_form() -> None:
    request = {
        "system_instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Who?"},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"x": 1}'},
            {"type": "function_call_output", "call_id": "a", "output": "Ada"},
        ],
        "model_settings": {"temperature": None, "top_p": None},
        "tools": [
            {
                "type": "FunctionTool",
                "name": "f",
                "description": "F.",
                "params_json_schema": {"type": "object"},
                "strict_json_schema": False,
            }
        ],
        "output_schema": None,
        "handoffs": [],
        "previous_response_id": None,
        "conversation_id": None,
        "prompt": None,
    }
    assert normal_form("openai-agents", request) == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Who?"},
            {"role": "assistant", "tool_calls": [{"id": "a", "name": "f", "arguments": {"x": 1}}]},
            {"role": "tool", "content": "Ada", "tool_call_id": "a"},
        ],
        "tools": [
            {"name": "f", "description": "F.", "parameters": {"type": "object"}, "strict": False}
        ],
        "settings": {},
        "output": {},
        "other": {},
    }
    newer = copy.deepcopy(request)
    newer["model_settings"]["prompt_cache_options"] = None
    newer["input"][1]["id"] = "fc_1"
    newer["input"][1]["status"] = "completed"
    newer["input"][1]["arguments"] = '{ "x" : 1 }'
    assert value_key("openai-agents", newer) == value_key("openai-agents", request)


def test_each_framework_turn_records_its_framework_and_version(tmp_path: Path) -> None:
    from presented_support import openai_agents_agent, pydantic_ai_agent

    pai = record(toolset(), tmp_path / "a", pydantic_ai_agent())
    sdk = record(toolset(), tmp_path / "b", openai_agents_agent())
    version = metadata.version("pydantic-ai-slim")
    assert [detail for _, detail in _turns(pai)] == [
        {"framework": "pydantic-ai-slim", "version": version}
    ] * 2
    assert _turns(sdk)[0][1] == {
        "framework": "openai-agents",
        "version": metadata.version("openai-agents"),
    }
    # the runtime descriptor names them too: the model provider's version
    (provider,) = json.loads((pai / "runtime.json").read_bytes())["providers"]
    assert provider["version"] == f"pydantic-ai-slim {version}"
    replay = asyncio.run(toolproof.replay_session(pai, pydantic_ai_agent()))
    assert (replay.identical, replay.turns) == (True, 2)


def test_a_refusal_names_both_versions_when_they_differ() -> None:
    now = framework_detail("pydantic-ai")["version"]
    then = {"framework": "pydantic-ai-slim", "version": "0.0.1"}
    assert version_change("pydantic-ai", then) == (
        f" (recorded under pydantic-ai-slim 0.0.1, replayed under {now})"
    )
    assert version_change("pydantic-ai", {**then, "version": now}) == ""
    assert version_change("pydantic-ai", {}) == ""  # a turn recorded before turns named it
    assert framework_detail("http") == {}


V1_LANGCHAIN = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "agent_runs_v1"
    / "runs"
    / "run_2d3e53b594d173d477007fbfaada25b19ba55d91bfe7dfd66ea0ff3b958a0254"
)
URL = "http://127.0.0.1:8047/v1/chat/completions"
READ_FILE = {
    "additionalProperties": False,
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "type": "object",
}


def test_a_committed_langchain_chat_completions_body_has_this_normal_form() -> None:
    # LangChain's ChatOpenAI turns are HTTP turns: their body's normal form is matched
    (_, detail), (second, _) = _turns(V1_LANGCHAIN)
    assert (detail["url"], detail["client"]) == (URL, "AsyncOpenAI/Python 3.63.0")
    assert normal_form("openai-chat", second) == {
        "messages": [
            {"role": "user", "content": "Who created README.md?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "call_readme", "name": "read_file", "arguments": {"path": "README.md"}}
                ],
            },
            {
                "role": "tool",
                "content": "toolproof records every tool call.\nCreated by Ada.",
                "tool_call_id": "call_readme",
            },
        ],
        "tools": [
            {
                "name": "lookup",
                "description": "Look an item up.",
                "parameters": LOOKUP,
                "strict": False,
            },
            {
                "name": "read_file",
                "description": "Read a file of the repository.",
                "parameters": READ_FILE,
                "strict": False,
            },
        ],
        "settings": {"model": "scripted"},  # "stream": false is unset
        "output": {},
        "other": {},
    }


def _http_key(body: dict[str, Any], url: str = URL) -> bytes:
    return turn_key("http", json.dumps(body).encode(), method="POST", url=url)


def test_fields_a_new_client_release_adds_with_defaults_leave_an_http_key_as_it_was() -> None:
    (_, _), (request, _) = _turns(V1_LANGCHAIN)
    newer = copy.deepcopy(request)
    newer["parallel_tool_calls"] = None
    newer["stream_options"] = {}
    newer["messages"][1]["refusal"] = None
    newer["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{ "path" : "README.md" }'
    newer["messages"][0]["content"] = [{"type": "text", "text": "Who created README.md?"}]
    newer["tools"][0]["function"]["strict"] = False
    assert _http_key(newer) == _http_key(request)
    for changed in (
        {"temperature": 0},  # a setting that is set
        {"model": "other"},
        {"tools": request["tools"][:1]},
        {"stream": True},
    ):
        assert _http_key({**request, **changed}) != _http_key(request), changed
    # another endpoint's JSON body is matched whole, as before
    elsewhere = "http://127.0.0.1:8047/v1/embeddings"
    assert _http_key(newer, elsewhere) != _http_key(request, elsewhere)


def test_an_http_refusal_names_both_clients_when_they_differ() -> None:
    then = {"client": "AsyncOpenAI/Python 3.62.0", "method": "POST"}
    now = {"client": "AsyncOpenAI/Python 3.63.0"}
    assert version_change("http", then, now) == (
        " (recorded by AsyncOpenAI/Python 3.62.0, replayed by AsyncOpenAI/Python 3.63.0)"
    )
    assert version_change("http", then, {"client": then["client"]}) == ""
    assert version_change("http", {"method": "POST"}, now) == ""  # recorded before clients
    assert version_change("http", then, None) == ""
