"""A run carries what its frozen replay needs: the tools exactly as presented to the framework.

``replay_session(run, agent)`` (and ``toolproof replay RUN --agent M:F``) replays a
recorded pydantic-ai, Agents SDK or LangChain run with no Toolset and no config;
``toolset=`` additionally checks the current tools against the recorded ones. Runs
recorded before the tools were stored (``tests/fixtures/agent_runs_v0``) replay as they
always did, with ``toolset=``, and say so when it is left out.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from llm_support import scripted_model
from presented_support import (
    HTTP_CALL_ID,
    http_replies,
    langchain_agent,
    langchain_http_agent,
    openai_agents_agent,
    pydantic_ai_agent,
    record,
    toolset,
)

import toolproof
from toolproof import ReplayRefused
from toolproof.contract.tools import PresentedTools, ToolSpec
from toolproof.errors import InputError
from toolproof.sessions.presented import present, presented_changes
from toolproof.verify.verifier import verify_run

V0 = Path(__file__).resolve().parents[1] / "fixtures" / "agent_runs_v0" / "runs"
V0_PYDANTIC_AI = V0 / "run_9396a19f6c4611d1585283d547cd382415635e4e6797d508671aa0561b46245b"
V0_LANGCHAIN = V0 / "run_77de28c803986763ffad21ba7dc99c634952fbc8fdd5ea2fad480c467feda70b"
RUNS = Path(__file__).resolve().parents[1] / "runs"

READ_FILE = {
    "name": "read_file",
    "description": "Read a file of the repository.",
    "input_schema": {
        "additionalProperties": False,
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "type": "object",
    },
    "output_schema": {"type": "string"},
    "strict": False,
    "schema_version": 1,
}


def _runtime(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / "runtime.json").read_bytes())
    return loaded


def test_a_pydantic_ai_run_with_model_turns_replays_from_the_run_alone(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path, pydantic_ai_agent())
    assert verify_run(run).ok
    replay = asyncio.run(toolproof.replay_session(run, pydantic_ai_agent()))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)


def test_an_agents_sdk_run_with_model_turns_replays_from_the_run_alone(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path, openai_agents_agent())
    assert verify_run(run).ok
    replay = asyncio.run(toolproof.replay_session(run, openai_agents_agent()))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)


def test_a_langchain_run_replays_from_the_run_alone_binding_the_same_tools(
    tmp_path: Path,
) -> None:
    live: list[dict[str, Any]] = []
    run = record(toolset(), tmp_path, langchain_agent(live))
    frozen: list[dict[str, Any]] = []
    replay = asyncio.run(toolproof.replay_session(run, langchain_agent(frozen)))
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 1, 0)
    # bound at each of the two model turns
    assert [tool["function"]["name"] for tool in live] == ["lookup", "read_file"] * 2
    assert live[1]["function"]["parameters"] == {
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "type": "object",
        "additionalProperties": False,
    }
    assert frozen == live  # what a provider would be sent, the same


def test_the_run_stores_each_tool_as_presented_in_a_versioned_record(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path, pydantic_ai_agent())
    presented = _runtime(run)["presented"]
    assert (presented["format"], [tool["name"] for tool in presented["tools"]]) == (
        1,
        ["lookup", "read_file"],
    )
    assert presented["tools"][1] == READ_FILE


def test_the_cli_replays_an_agent_run_without_a_config(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path, pydantic_ai_agent())
    module = tmp_path / "replayed_agent.py"
    module.write_text(
        "from presented_support import pydantic_ai_agent\n\nagent = pydantic_ai_agent()\n",
        encoding="utf-8",
    )
    cli = str(Path(sys.executable).parent / "toolproof")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RUNS), *sys.path])}
    done = subprocess.run(
        [cli, "replay", str(run), "--agent", "replayed_agent:agent"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (
        0,
        "agent replay identical: 1 tool call and 2 model turns served from the recording, "
        "0 live calls; the run verifies\n",
    ), done.stderr


def test_a_toolset_whose_tools_differ_is_refused_with_a_field_level_diff(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path, pydantic_ai_agent())
    changed = toolset(description="Read a file.")
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(toolproof.replay_session(run, pydantic_ai_agent(), toolset=changed))
    recorded = _runtime(run)["toolset"]["tools"][1]["fingerprint"]
    now = changed.descriptor().tools[1].fingerprint
    assert refused.value.message == (
        "frozen replay refused: the runtime descriptor changed: changed read_file "
        f"(fingerprint {recorded} -> {now} (its spec changed: description, schemas or "
        "annotations)); the tools as presented to the agent's framework differ from the "
        'recorded ones: read_file description "Read a file of the repository." -> '
        '"Read a file."'
    )
    same = asyncio.run(toolproof.replay_session(run, pydantic_ai_agent(), toolset=toolset()))
    assert (same.identical, same.turns) == (True, 2)


def test_an_old_run_replays_with_the_toolset_as_it_always_did() -> None:
    assert "presented" not in _runtime(V0_PYDANTIC_AI)
    replay = asyncio.run(
        toolproof.replay_session(V0_PYDANTIC_AI, pydantic_ai_agent(), toolset=toolset())
    )
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)
    chain = asyncio.run(
        toolproof.replay_session(V0_LANGCHAIN, langchain_agent(), toolset=toolset())
    )
    assert (chain.identical, chain.calls) == (True, 1)


def test_an_old_run_without_the_toolset_is_refused_saying_it_stores_no_tools() -> None:
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(toolproof.replay_session(V0_PYDANTIC_AI, pydantic_ai_agent()))
    assert refused.value.message.splitlines()[0] == (
        "frozen replay refused at event 3: the agent made an unrecorded pydantic-ai model "
        "request (occurrence 1); a live model turn would be a new run (this run stores no "
        "tool definitions, being recorded before runs did, and this replay has no toolset=, "
        "so the agent sees the recorded tool names with open schemas: pass the Toolset, "
        "replay_session(..., toolset=...) or toolproof replay --config toolproof.toml)"
    )
    with pytest.raises(InputError) as raised:
        asyncio.run(toolproof.replay_session(V0_LANGCHAIN, langchain_agent()))
    assert raised.value.message == (
        "session.langchain_tools() in a frozen replay of a run that stores no tool "
        "definitions (recorded before runs did) needs the Toolset: pass "
        "replay_session(..., toolset=...) or toolproof replay --config toolproof.toml"
    )


def test_a_copied_run_replays_anywhere(tmp_path: Path) -> None:
    run = record(toolset(), tmp_path / "a", pydantic_ai_agent())
    moved = shutil.copytree(run, tmp_path / "elsewhere" / run.name)
    replay = asyncio.run(toolproof.replay_session(moved, pydantic_ai_agent()))
    assert (replay.identical, replay.turns) == (True, 2)


def test_every_changed_field_of_the_presented_tools_is_named() -> None:
    recorded = present(
        [
            ToolSpec(name="a", input_schema={"type": "object"}),
            ToolSpec(
                name="read_file",
                description="Read.",
                input_schema={"properties": {"path": {"type": "string"}}, "type": "object"},
            ),
        ]
    )
    current = present(
        [
            ToolSpec(
                name="read_file",
                description="Read.",
                input_schema={
                    "properties": {"path": {"type": "integer"}, "limit": {"type": "integer"}},
                    "type": "object",
                },
                output_schema={"type": "string"},
            ),
            ToolSpec(name="extra", input_schema={"type": "object"}),
        ]
    )
    assert presented_changes(recorded, current) == [
        "tool a removed",
        'read_file input_schema.properties.limit added: {"type":"integer"}',
        'read_file input_schema.properties.path.type "string" -> "integer"',
        'read_file output_schema null -> {"type":"string"}',
        "tool extra added",
    ]
    assert presented_changes(recorded, recorded) == []
    swapped = PresentedTools(tools=list(reversed(recorded.tools)))
    assert presented_changes(recorded, swapped) == [
        "the order changed: a, read_file -> read_file, a"
    ]


V1 = Path(__file__).resolve().parents[1] / "fixtures" / "agent_runs_v1" / "runs"


V1_LANGCHAIN = "run_2d3e53b594d173d477007fbfaada25b19ba55d91bfe7dfd66ea0ff3b958a0254"
V1_LANGCHAIN_URL = "http://127.0.0.1:8047/v1"
"""The scripted endpoint the committed LangChain run was recorded against (record.py)."""


def _v1_agent(agent: str) -> Any:
    if agent == "pydantic-ai":
        return pydantic_ai_agent()
    if agent == "openai-agents":
        return openai_agents_agent()
    return langchain_http_agent(V1_LANGCHAIN_URL)


@pytest.mark.parametrize(
    ("run_id", "agent"),
    [
        ("run_ad9a6db80e5e938863361fc92a563311cee3caf1fc3c4e5d83ee3a0d5bb2a01d", "pydantic-ai"),
        ("run_f72337e6051a4d8e2abd025851c89a0d580a055ad10ff4a1036f530dc647075e", "openai-agents"),
        (V1_LANGCHAIN, "langchain"),
    ],
)
def test_a_committed_run_replays_alone_under_the_installed_framework(
    run_id: str, agent: str
) -> None:
    # recorded with pydantic-ai-slim 2.78.0, openai-agents 0.24.0, and langchain 1.5.2
    # with langchain-openai 1.7.4 and openai 3.63.0 (record.py beside them; LangChain's
    # model turns are HTTP turns, the only way they are recorded); replayed with
    # whatever versions are installed, and no server: they match on normal forms
    replay = asyncio.run(toolproof.replay_session(V1 / run_id, _v1_agent(agent)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)


def test_a_langchain_run_on_chat_openai_records_its_turns_over_http_and_replays_alone(
    tmp_path: Path,
) -> None:
    with scripted_model(*http_replies()) as server:
        run = record(toolset(), tmp_path, langchain_http_agent(server.base_url))
        asked = [request["body"]["messages"][-1]["role"] for request in server.requests]
    assert asked == ["user", "tool"]  # the two model turns reached the endpoint live
    assert verify_run(run).ok
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    turns = [e for e in events if e["type"] == "model_turn"]
    assert [(e["source"], e["detail"]["client"]) for e in turns] == [
        ("http", f"AsyncOpenAI/Python {metadata.version('openai')}")
    ] * 2
    (called,) = [e for e in events if e["type"] == "tool_called"]
    assert (called["model_call_id"], called["model_turn"]) == (HTTP_CALL_ID, "turn-00000001")
    # the endpoint is gone: the run alone serves both turns
    replay = asyncio.run(toolproof.replay_session(run, langchain_http_agent(server.base_url)))
    assert (replay.identical, replay.calls, replay.turns, replay.live_calls) == (True, 1, 2, 0)


def test_a_committed_langchain_run_asked_otherwise_is_refused_naming_the_field() -> None:
    agent = langchain_http_agent(V1_LANGCHAIN_URL, prompt="Who wrote README.md?")
    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(toolproof.replay_session(V1 / V1_LANGCHAIN, agent))
    now = f"AsyncOpenAI/Python {metadata.version('openai')}"
    versions = (
        ""
        if now == "AsyncOpenAI/Python 3.63.0"
        else (f" (recorded by AsyncOpenAI/Python 3.63.0, replayed by {now})")
    )
    lines = refused.value.message.splitlines()
    assert lines[:3] == [
        "frozen replay refused at event 3: the agent made an unrecorded http model request "
        f"(occurrence 1); a live model turn would be a new run{versions}",
        "--- recorded",
        "+++ asked",
    ]
    changed = [line for line in lines[3:] if line[:1] in "+-"]
    assert changed == [
        '-          "content": "Who created README.md?",',
        '+          "content": "Who wrote README.md?",',
    ]
