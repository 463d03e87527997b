"""A session sealed into segments, replayed frozen as one agent run (``chain=True``).

Issue 31 (runs of any length): ``replay_session(head, agent, chain=True)`` and
``toolproof replay HEAD --agent M:F --chain`` verify the chain, then serve every
segment's calls and model turns in order, one segment in memory at a time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_support import http_turn
from cli_support import toolproof
from runs_support import fetch_toolset

import toolproof as tp
from toolproof.adapters.session_runs import AgentReplay
from toolproof.errors import ReplayRefused
from toolproof.runs.chain import verify_chain
from toolproof.runs.turns import exchange_key

STEPS = 3  # 3 calls and 3 turns: 6 steps, 3 segments of 2


async def agent(session: tp.Session, *, changed: int | None = None) -> None:
    """Call ``fetch(i)`` then ask the model ``q<i>``, for each i; ``changed``: that call differs."""
    for i in range(STEPS):
        await session.call("fetch", {"i": 100 if i == changed else i})
        exchange = http_turn(i)
        if session.frozen:
            key = exchange_key("http", exchange.request, exchange.detail)
            assert session.serve_turn("http", key).response == exchange.response
        else:
            session.record_turn(exchange, session.admit_turn("http"))
    session.answer("done")


async def _record(root: Path) -> list[Path]:
    async with tp.record_session(fetch_toolset(), root=root, task="t", segment_calls=2) as session:
        await agent(session)
    return [root / "runs" / run_id for run_id in session.run_ids]


@pytest.fixture
def chain(tmp_path: Path) -> tuple[Path, list[Path]]:
    runs = asyncio.run(_record(tmp_path / "root"))
    assert len(runs) == 3
    assert verify_chain(runs[-1]).ok
    return tmp_path / "root", runs


def test_a_chain_of_three_segments_replays_identically(chain: tuple[Path, list[Path]]) -> None:
    _, runs = chain
    replay = asyncio.run(tp.replay_session(runs[-1], agent, chain=True))
    assert replay == AgentReplay(runs[-1].name, True, 3, 0, True, turns=3, segments=3)


def test_without_chain_the_head_replays_alone_as_before(chain: tuple[Path, list[Path]]) -> None:
    _, runs = chain
    with pytest.raises(ReplayRefused) as caught:
        asyncio.run(tp.replay_session(runs[-1], agent))
    # the head holds call 3 and turn 3 only: the agent's first call is not in it
    assert caught.value.message.startswith(
        "frozen replay refused at event 1: the agent made an unrecorded call to 'fetch' "
        "(occurrence 1)"
    )


def test_a_divergence_in_segment_two_names_segment_two(chain: tuple[Path, list[Path]]) -> None:
    _, runs = chain
    steps = [json.loads((run / "spec.json").read_bytes())["steps"] for run in runs]
    assert [[step["id"] for step in found] for found in steps] == [
        ["call-00000001", "turn-00000001"],
        ["call-00000002", "turn-00000002"],
        ["call-00000003", "turn-00000003"],
    ]

    async def diverging(session: tp.Session) -> None:
        await agent(session, changed=1)  # the second call, recorded in segment 2

    with pytest.raises(ReplayRefused) as caught:
        asyncio.run(tp.replay_session(runs[-1], diverging, chain=True))
    first, *diff = caught.value.message.splitlines()
    assert first == (
        f"frozen replay refused in segment 2 of 3 (run {runs[1].name}) at event 1: the agent "
        "made an unrecorded call to 'fetch' (occurrence 1); a live call would be a new run"
    )
    assert caught.value.fields["event"] == 1
    assert caught.value.fields["rule"] == "call"
    assert '-    "i": 1' in diff
    assert '+    "i": 100' in diff


def test_an_agent_that_stops_early_is_refused_in_the_next_segment(
    chain: tuple[Path, list[Path]],
) -> None:
    _, runs = chain

    async def short(session: tp.Session) -> None:
        await session.call("fetch", {"i": 0})
        exchange = http_turn(0)
        session.serve_turn("http", exchange_key("http", exchange.request, exchange.detail))
        session.answer("done")

    with pytest.raises(ReplayRefused) as caught:
        asyncio.run(tp.replay_session(runs[-1], short, chain=True))
    assert caught.value.message.splitlines()[0] == (
        f"frozen replay refused in segment 2 of 3 (run {runs[1].name}) at event 1: the agent "
        "never made the recorded call to 'fetch'"
    )


def test_a_tampered_segment_refuses_before_any_agent_step(
    chain: tuple[Path, list[Path]],
) -> None:
    _, runs = chain
    evidence = runs[1] / "evidence.pack"
    evidence.write_bytes(evidence.read_bytes() + b"!")
    steps: list[str] = []

    async def watched(session: tp.Session) -> None:
        steps.append("ran")
        await agent(session)

    problem = verify_chain(runs[-1]).problem
    assert problem.startswith(f"{runs[1].name} does not verify: [manifest] ")
    with pytest.raises(ReplayRefused) as caught:
        asyncio.run(tp.replay_session(runs[-1], watched, chain=True))
    assert caught.value.message == f"frozen replay refused: {problem}"
    assert caught.value.fields["check"] == "verify"
    assert steps == []


def test_a_missing_predecessor_refuses_with_the_chains_problem(
    chain: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    _, runs = chain
    runs[0].rename(tmp_path / runs[0].name)
    problem = verify_chain(runs[-1]).problem
    assert problem.endswith(
        f"its predecessor runs/{runs[0].name} is not under this root (link not checked)"
    )
    with pytest.raises(ReplayRefused) as caught:
        asyncio.run(tp.replay_session(runs[-1], agent, chain=True))
    assert caught.value.message == f"frozen replay refused: {problem}"


def test_a_run_that_is_not_a_segment_is_a_chain_of_one(tmp_path: Path) -> None:
    async def record() -> Path:
        async with tp.record_session(fetch_toolset(), root=tmp_path, task="t") as session:
            await agent(session)
        return tmp_path / "runs" / session.run_id

    run = asyncio.run(record())
    assert not (run / "segment.json").exists()
    replay = asyncio.run(tp.replay_session(run, agent, chain=True))
    assert replay == AgentReplay(run.name, True, 3, 0, True, turns=3, segments=1)


@pytest.fixture
def agent_module(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "agentmod"
    folder.mkdir()
    source = f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_segment_replay import agent
    """
    (folder / "chainagent.py").write_text(textwrap.dedent(source), encoding="utf-8")
    yield folder
    sys.modules.pop("chainagent", None)


def test_replay_chain_from_the_command_line(
    chain: tuple[Path, list[Path]], agent_module: Path
) -> None:
    root, runs = chain
    base = ["replay", runs[-1].name, "--root", str(root), "--agent", "chainagent:agent"]
    ran = toolproof(*base, "--chain", "--json", cwd=agent_module)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout) == {
        "refused": False,
        "agent": "chainagent:agent",
        "run_id": runs[-1].name,
        "identical": True,
        "calls": 3,
        "turns": 3,
        "live_calls": 0,
        "verified": True,
        "segments": 3,
    }
    ran = toolproof(*base, "--chain", cwd=agent_module)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip() == (
        "agent replay identical: 3 tool calls and 3 model turns served from the recording, "
        "0 live calls; the chain of 3 segments verifies"
    )
    ran = toolproof(*base, cwd=agent_module)  # the head alone: its own calls only
    assert ran.returncode == 2
    ran = toolproof("replay", runs[-1].name, "--root", str(root), "--chain")
    assert ran.returncode != 0
    assert "--chain replays an agent's session: give --agent" in ran.stdout + ran.stderr


def test_concurrent_calls_across_segment_boundaries_replay_in_asked_order(tmp_path: Path) -> None:
    async def together(session: tp.Session) -> None:
        # admitted in a full segment, answered after the next one opened
        await asyncio.gather(*(session.call("fetch", {"i": i}) for i in range(8)))

    async def reversed_order(session: tp.Session) -> None:
        await asyncio.gather(*(session.call("fetch", {"i": i}) for i in reversed(range(8))))

    async def scenario() -> tuple[Path, tuple[AgentReplay, ReplayRefused]]:
        async with tp.record_session(
            fetch_toolset(), root=tmp_path, task="t", segment_calls=3
        ) as session:
            await together(session)
        head = tmp_path / "runs" / session.run_id
        replay = await tp.replay_session(head, together, chain=True)
        with pytest.raises(ReplayRefused) as caught:
            await tp.replay_session(head, reversed_order, chain=True)
        return tmp_path / "runs" / session.run_ids[0], (replay, caught.value)

    first, (replay, refused) = asyncio.run(scenario())
    assert (replay.calls, replay.live_calls, replay.segments) == (8, 0, 3)
    # a call of segment 3 asked while segment 1's are unserved: a divergence in segment 1
    head, *diff = refused.message.splitlines()
    assert head == (
        f"frozen replay refused in segment 1 of 3 (run {first.name}) at event 1: the agent "
        "made an unrecorded call to 'fetch' (occurrence 1); a live call would be a new run"
    )
    assert '-    "i": 0' in diff
    assert '+    "i": 7' in diff
