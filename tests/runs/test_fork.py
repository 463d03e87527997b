"""Fork at the first divergence: ``replay_session(run, agent, toolset=..., then="live")``.

A real pydantic-ai ``Agent`` over a ``FunctionModel`` runs two prompts in one session:
the first reads README.md, the second looks an item up. Changing the second prompt and
replaying with ``then="live"`` serves the first prompt's turns and call from the
recording (no model asked, no tool body run: both recorded again in the new run), and
runs the second prompt live; the new run names its parent and the divergence event,
verifies, and ``toolproof diff PARENT CHILD`` shows the shared prefix and the fork. A
changed tool forks at its first call; an Agents SDK run whose tool description changed
forks at its first model turn (the tools are part of the request).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import presented_support
import pytest
from agent_support import AgentCode, record_agent
from presented_support import openai_agents_agent as agents_agent
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, ToolCallPart
from pydantic_ai.messages import ModelResponse as PaiResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

import toolproof
from toolproof.adapters.cli import app
from toolproof.adapters.cli.agent_replay import load_agent
from toolproof.contract.trace import ModelTurn, ToolCalled
from toolproof.errors import InputError
from toolproof.runs.diff import shared_prefix
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import RunView

HERE = Path(__file__).resolve().parent
FILES = {"README.md": "toolproof records every tool call.\nCreated by Ada."}
ANSWER = 'README.md says it was "Created by Ada" [a].'


def toolset(version: str = "0") -> toolproof.Toolset:
    """``read_file(path)`` and ``lookup(item)`` at ``version`` (past "0": another count)."""

    async def read_file(path: str) -> str:
        """Read a file of the repository."""
        return FILES.get(path, "")

    async def lookup(item: str) -> dict[str, Any]:
        """Look an item up."""
        return {"item": item, "count": len(item) + int(version)}

    tools = toolproof.Toolset()
    tools.add(toolproof.Tool.from_function(read_file))
    tools.add(toolproof.Tool.from_function(lookup, version=version))
    return tools.seal()


def two_prompts(second: str, asked: list[str]) -> AgentCode:
    """Ask "Who created README.md?" (read_file), then ``second`` (lookup); answer the first.

    ``asked``: gains the last user prompt of every request the live model is asked.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        prompt = str(next(m for m in messages if isinstance(m, ModelRequest)).parts[-1].content)
        asked.append(prompt)
        if not any(isinstance(m, PaiResponse) for m in messages):
            if prompt.startswith("Who"):
                return PaiResponse(parts=[ToolCallPart("read_file", {"path": "README.md"}, "a")])
            return PaiResponse(parts=[ToolCallPart("lookup", {"item": "Ada"}, "b")])
        return PaiResponse(parts=[TextPart(ANSWER if prompt.startswith("Who") else "Found.")])

    async def agent(session: toolproof.Session) -> None:
        model = session.pydantic_ai_model(FunctionModel(respond))
        runner = Agent(model, toolsets=[session.pydantic_ai_toolset()])
        first = (await runner.run("Who created README.md?")).output
        await runner.run(second)
        session.answer(first)

    return agent


def _fork(run: Path, agent: AgentCode, **options: Any) -> toolproof.AgentReplay:
    return asyncio.run(toolproof.replay_session(run, agent, then="live", **options))


def _runtime(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / "runtime.json").read_bytes())
    return loaded


def _first_turn_of_second_prompt(run: Path) -> int:
    """The trace index of the third model turn (the second prompt's first request)."""
    turns = [event.idx for event in RunView(run).events or [] if isinstance(event, ModelTurn)]
    return turns[2]


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    return record_agent(toolset(), tmp_path, "Who?", two_prompts("Look Ada up.", []))


def test_a_changed_second_prompt_is_served_up_to_it_then_runs_live(parent: Path) -> None:
    asked: list[str] = []
    replay = _fork(parent, two_prompts("Look Ada up, please.", asked), toolset=toolset())
    fork_at = _first_turn_of_second_prompt(parent)
    assert replay.forked is not None
    child = parent.parent / replay.forked.run_id
    # the first prompt's two turns and its call were served: the model was asked only
    # the second prompt's two requests, and only lookup ran
    assert (replay.identical, replay.turns, replay.calls, replay.live_calls) == (False, 2, 1, 0)
    assert asked == ["Look Ada up, please.", "Look Ada up, please."]
    assert (replay.forked.live_turns, replay.forked.live_calls) == (2, 1)
    forked_from = _runtime(child)["forked_from"]
    assert forked_from == {
        "run": parent.name,
        "event": fork_at,
        "schema_version": 1,
        "reason": "the agent made an unrecorded pydantic-ai model request "
        "(occurrence 1); a live model turn would be a new run",
    }
    assert replay.forked.forked_from.model_dump() == forked_from
    assert verify_run(child).ok
    # the served prefix is in the child's trace as recorded: every event up to the forked
    # step's request evidence is the parent's but for the hash chain and the session-bound
    # idempotency keys
    parent_trace, child_trace = (
        (parent / "trace.jsonl").read_bytes(),
        (child / "trace.jsonl").read_bytes(),
    )
    assert (fork_at, shared_prefix(parent_trace, child_trace)) == (18, 16)
    calls = [e for e in RunView(child).events or [] if isinstance(e, ToolCalled)]
    assert [(c.call.tool, c.model_call_id) for c in calls] == [("read_file", "a"), ("lookup", "b")]
    # the answer cites the served call by its model id: the claim still holds
    assert json.loads((child / "report.json").read_bytes())["outcome"] == "passed"


def test_diff_of_parent_and_child_names_the_shared_prefix_and_the_fork(parent: Path) -> None:
    replay = _fork(parent, two_prompts("Look Ada up, please.", []), toolset=toolset())
    assert replay.forked is not None
    fork_at = _first_turn_of_second_prompt(parent)
    result = CliRunner().invoke(
        app, ["diff", str(parent), str(parent.parent / replay.forked.run_id)]
    )
    assert result.exit_code == 2, result.output  # a fork differs from its parent
    lines = result.output.splitlines()
    start = lines.index(f"fork: {replay.forked.run_id} forked from {parent.name}")
    assert lines[start + 1 : start + 3] == [
        "shared prefix: events 0-15 (16 events) are the parent's",
        "fork at event 18: the agent made an unrecorded pydantic-ai model request "
        "(occurrence 1); a live model turn would be a new run",
    ]
    assert fork_at == 18


def test_a_changed_tool_forks_at_its_first_call(parent: Path) -> None:
    asked: list[str] = []
    replay = _fork(parent, two_prompts("Look Ada up.", asked), toolset=toolset(version="2"))
    assert replay.forked is not None
    lookup = next(
        e.idx
        for e in RunView(parent).events or []
        if isinstance(e, ToolCalled) and e.call.tool == "lookup"
    )
    forked_from = replay.forked.forked_from
    assert (forked_from.event, replay.turns, replay.calls) == (lookup, 3, 1)
    assert forked_from.reason == (
        "tool 'lookup' changed since the recording (its descriptor differs)"
    )
    # the changed tool ran live and the model saw its new answer (a live turn)
    assert (replay.forked.live_calls, replay.forked.live_turns, asked) == (1, 1, ["Look Ada up."])
    assert verify_run(parent.parent / replay.forked.run_id).ok


def test_an_agent_that_never_diverges_forks_a_copy_saying_so(parent: Path) -> None:
    replay = _fork(parent, two_prompts("Look Ada up.", []), toolset=toolset())
    assert replay.forked is not None
    assert (replay.identical, replay.turns, replay.calls, replay.forked.live_turns) == (
        True,
        4,
        2,
        0,
    )
    assert replay.forked.forked_from.event is None
    assert replay.forked.forked_from.reason == (
        "no divergence: the agent asked only what the recording holds"
    )


def test_then_live_needs_the_toolset(parent: Path) -> None:
    with pytest.raises(InputError, match="then='live' calls the tools live after the fork"):
        _fork(parent, two_prompts("x", []))
    with pytest.raises(InputError, match="then='later': expected 'frozen' or 'live'"):
        asyncio.run(toolproof.replay_session(parent, two_prompts("x", []), then="later"))  # type: ignore[arg-type]


TOOLS_MODULE = '''
FILES = {"README.md": "toolproof records every tool call.\\nCreated by Ada."}


async def read_file(path: str) -> str:
    """Read a file of the repository."""
    return FILES.get(path, "")


async def lookup(item: str) -> dict:
    """Look an item up."""
    return {"item": item, "count": len(item)}
'''

CONFIG = """[[python]]
module = "fork_tools"
functions = ["read_file", "lookup"]
path = "."
"""

AGENT_MODULE = """from test_fork import two_prompts

agent = two_prompts("Look Ada up.", [])
changed = two_prompts("Look Ada up, please.", [])
"""


def test_the_cli_forks_with_then_live_and_diff_shows_the_fork(tmp_path: Path) -> None:
    (tmp_path / "fork_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "fork_agent.py").write_text(AGENT_MODULE, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    parent = record_agent(config, tmp_path / "root", "Who?", two_prompts("Look Ada up.", []))
    cli = str(Path(sys.executable).parent / "toolproof")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    base = [cli, "replay", str(parent), "--agent", "fork_agent:changed"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False
        )

    done = run(*base, "--config", "toolproof.toml", "--then-live")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    child = lines[2].split()[2]
    assert lines == [
        "agent replay forked: 1 tool call and 2 model turns served from the recording, then "
        "1 live call and 2 live model turns",
        "the agent diverged at event 18: the agent made an unrecorded pydantic-ai model "
        "request (occurrence 1); a live model turn would be a new run",
        f"new run: {child} (forked from {parent.name})",
    ]
    assert _runtime(tmp_path / "root" / "runs" / child)["forked_from"]["run"] == parent.name
    shown = run(cli, "diff", parent.name, child, "--root", "root", "--json")
    assert json.loads(shown.stdout)["fork"] == {
        "parent": parent.name,
        "child": child,
        "event": 18,
        "reason": "the agent made an unrecorded pydantic-ai model request (occurrence 1); a "
        "live model turn would be a new run",
        "shared": 16,
    }
    alone = run(*base, "--then-live")
    assert (alone.returncode, alone.stderr.splitlines()[0]) == (
        1,
        "error: then='live' calls the tools live after the fork: it needs toolset= (the "
        "Toolset or toolproof.toml; toolproof replay --then-live --config)",
    )


def test_an_agents_sdk_run_whose_tool_description_changed_forks_at_its_first_turn(
    tmp_path: Path,
) -> None:
    parent = presented_support.record(presented_support.toolset(), tmp_path, agents_agent())
    changed = presented_support.toolset(description="Read one file.")
    replay = _fork(parent, agents_agent(), toolset=changed)
    assert replay.forked is not None
    first_turn = next(e.idx for e in RunView(parent).events or [] if isinstance(e, ModelTurn))
    forked_from = replay.forked.forked_from
    # the tools are part of the model's request: nothing is served, all of it runs live
    assert (forked_from.event, replay.turns, replay.calls) == (first_turn, 0, 0)
    assert forked_from.reason == (
        "the agent made an unrecorded openai-agents model request (occurrence 1); a live "
        "model turn would be a new run"
    )
    assert (replay.forked.live_turns, replay.forked.live_calls) == (2, 1)
    assert verify_run(tmp_path / "runs" / replay.forked.run_id).ok


@pytest.mark.parametrize("reference", ["agents/triage.py:agent", "../foo:bar", ".triage:agent"])
def test_an_agent_given_as_a_file_path_is_refused_naming_the_rule(reference: str) -> None:
    module = reference.partition(":")[0]
    with pytest.raises(InputError) as refused:
        load_agent(reference)
    assert refused.value.message == (
        f"--agent {reference!r}: {module!r} is not a module name (rule: dotted Python names "
        "importable from the working directory, e.g. agents.triage, not a file path)"
    )
