"""An imported server's sampling and elicitation reach the Python callbacks the user gives.

``tests/fixtures/mcp_asking_server.py`` (the SDK's ``MCPServer``) asks during its calls:
over 2026-07-28 inside an ``InputRequiredResult`` (the SDK's client retries with the
answer), over 2025-11-25 as ``elicitation/create`` / ``sampling/createMessage`` requests.
``load_toolset(..., sample=, elicit=)`` and ``record_session(..., sample=, elicit=)``
answer them; in a recorded session each question and answer is a ``request_relayed``
event of the call's block, with both as evidence, and the run verifies and replays.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import ROOT

from toolproof import load_toolset, record_session
from toolproof.bundle.evidence import RunEvidence
from toolproof.identity import canonical_json
from toolproof.runs.replay import replay_run
from toolproof.tools.resources import MCP_SERVERS
from toolproof.verify.verifier import verify_run

ASKING = ROOT / "tests" / "fixtures" / "mcp_asking_server.py"
REVISIONS = [("2026-07-28", False), ("2025-11-25", True)]
WHO = {"properties": {"name": {"title": "Name", "type": "string"}}, "required": ["name"]}
HAIKU = {"role": "assistant", "content": {"type": "text", "text": "old pond"}, "model": "m1"}


def asking_config(tmp_path: Path, legacy: bool) -> Path:
    """The fixture as ``[[mcp]] ask``; ``legacy``: a 2025-11-25 server (``ASKING_LEGACY``)."""
    path = tmp_path / "toolproof.toml"
    env = '\nenv = { ASKING_LEGACY = "1" }' if legacy else ""
    path.write_text(
        f'[[mcp]]\nname = "ask"\ncommand = "{sys.executable}"\nargs = ["{ASKING}"]{env}\n',
        encoding="utf-8",
    )
    return path


class Asker:
    """The user's callbacks: an elicitation answered by ``name`` (or declined), a sample."""

    def __init__(self, action: str = "accept") -> None:
        self.action = action
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("elicit", params))
        if params["message"] == "Go ahead?":
            if self.action == "raise":
                raise ValueError("nope")
            return {"action": self.action}
        return {"action": "accept", "content": {"name": "Ada"}}

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("sample", params))
        return HAIKU


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_the_callbacks_answer_a_servers_questions_during_its_calls(
    tmp_path: Path, revision: str, legacy: bool
) -> None:
    asker = Asker(action="decline")

    async def main() -> list[Any]:
        config = asking_config(tmp_path, legacy)
        async with load_toolset(config, sample=asker.sample, elicit=asker.elicit) as toolset:
            assert toolset.resources[MCP_SERVERS]["ask"]["protocol_version"] == revision
            return [
                (await toolset["ask_greet"].call({"greeting": "Hello"})).value,
                (await toolset["ask_haiku"].call({"topic": "frogs"})).value,
                (await toolset["ask_decide"].call({})).value,
            ]

    assert asyncio.run(main()) == [
        {"result": "Hello, Ada!"},
        {"result": "frogs (m1): old pond"},
        {"result": "decline"},
    ]
    [(first, greet), (second, haiku), (third, decide)] = asker.asked
    assert (first, greet["mode"], greet["message"]) == ("elicit", "form", "Who is asking?")
    assert {key: greet["requestedSchema"][key] for key in WHO} == WHO
    assert (second, haiku) == (
        "sample",
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "A haiku about frogs"}}
            ],
            "maxTokens": 50,
        },
    )
    assert (third, decide["message"]) == ("elicit", "Go ahead?")


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_only_what_has_a_callback_is_announced(tmp_path: Path, revision: str, legacy: bool) -> None:
    asker = Asker()

    async def main() -> tuple[Any, Any]:
        async with load_toolset(asking_config(tmp_path, legacy), elicit=asker.elicit) as toolset:
            greeted = await toolset["ask_greet"].call({"greeting": "Hi"})
            sampled = await toolset["ask_haiku"].call({"topic": "frogs"})
            return greeted.value, sampled.failure

    greeted, failure = asyncio.run(main())
    assert greeted == {"result": "Hi, Ada!"}
    assert failure is not None
    assert failure.message == (
        "MCP server 'ask' answered tools/call with error -32021: Client did not declare the "
        "sampling capability required by resolver '__main__:ask_model'"
    )
    assert [kind for kind, _ in asker.asked] == ["elicit"]


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_a_callback_that_raises_fails_the_call_naming_it(
    tmp_path: Path, revision: str, legacy: bool
) -> None:
    asker = Asker(action="raise")

    async def main() -> Any:
        config = asking_config(tmp_path, legacy)
        async with load_toolset(config, sample=asker.sample, elicit=asker.elicit) as toolset:
            return (await toolset["ask_decide"].call({})).failure

    failure = asyncio.run(main())
    assert failure is not None
    assert (failure.kind, failure.message) == (
        "tool_error",
        "MCP server 'ask' answered tools/call with error -32603: the 'elicit' callback "
        "raised ValueError: nope",
    )


def events_of(run: Path) -> list[dict[str, Any]]:
    lines = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize(("revision", "legacy"), REVISIONS)
def test_a_recorded_session_keeps_each_question_and_answer_in_the_calls_block(
    tmp_path: Path, revision: str, legacy: bool
) -> None:
    asker = Asker()
    root = tmp_path / "artifacts"

    async def main() -> list[Any]:
        async with record_session(
            asking_config(tmp_path, legacy),
            root=root,
            task="greet and write",
            sample=asker.sample,
            elicit=asker.elicit,
        ) as session:
            greeted = await session.call("ask_greet", {"greeting": "Hello"})
            added = await session.call("ask_add", {"a": 1, "b": 2})
            written = await session.call("ask_haiku", {"topic": "frogs"})
            return [greeted.value, added.value, written.value]

    assert asyncio.run(main()) == [
        {"result": "Hello, Ada!"},
        {"result": 3},
        {"result": "frogs (m1): old pond"},
    ]
    [run] = (root / "runs").iterdir()
    events = events_of(run)
    relayed = [e for e in events if e["type"] == "request_relayed"]
    assert [(e["step"], e["method"], e["error"]) for e in relayed] == [
        ("call-00000001", "elicitation/create", ""),
        ("call-00000003", "sampling/createMessage", ""),
    ]
    elicited, sampled = relayed
    assert elicited["request"]["message"] == "Who is asking?"
    assert elicited["answer"] == {"action": "accept", "content": {"name": "Ada"}}
    assert sampled["request"]["maxTokens"] == 50
    assert sampled["answer"] == HAIKU
    records = [e["evidence"] for e in events if e["type"] == "evidence_registered"]
    kinds = [r for r in records if r["source"]["kind"].startswith("relayed_")]
    assert [r["source"]["kind"] for r in kinds] == ["relayed_request", "relayed_answer"] * 2
    assert RunEvidence.open(run).read(kinds[3]["id"]) == canonical_json(HAIKU)
    verification = verify_run(run)
    assert verification.ok, verification.failures
    replayed = asyncio.run(replay_run(run))
    assert (replayed.identical, replayed.live_calls) == (True, 0)
