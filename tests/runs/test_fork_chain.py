"""A fork of a session sealed into segments (``replay_session(head, agent, chain=True,
then="live")``, ``toolproof replay HEAD --agent M:F --chain --then-live``): the whole
chain is served until the first divergence, then the agent goes on live; the new run
names the segment it diverged in (docs/agents.md "Fork at the first divergence").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agent_support import AgentCode, http_turn
from runs_support import fetch_toolset

import toolproof as tp
from toolproof.contract.forks import ForkedFrom
from toolproof.runs.chain import verify_chain
from toolproof.runs.turns import exchange_key
from toolproof.verify.verifier import verify_run


def agent(changed: int | None = None, asked: list[int] | None = None) -> AgentCode:
    """``fetch(i)`` then the model ``q<i>`` for i in 0..2, as a model recorder asks a turn."""

    async def run(session: tp.Session) -> None:
        for i in range(3):
            await session.call("fetch", {"i": 100 if i == changed else i})
            exchange = http_turn(i)
            key = exchange_key("http", exchange.request, exchange.detail)
            if session.known_turn("http", key) is None:  # live: ask, then record
                (asked if asked is not None else []).append(i)
                session.record_turn(exchange, session.admit_turn("http"))
        session.answer("done")

    return run


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    async def record() -> list[str]:
        async with tp.record_session(
            fetch_toolset(), root=tmp_path, task="t", segment_calls=2
        ) as session:
            await agent()(session)
        return session.run_ids

    found = [tmp_path / "runs" / run_id for run_id in asyncio.run(record())]
    assert len(found) == 3 and verify_chain(found[-1]).ok
    return found


def test_a_chain_is_served_across_segments_until_the_divergence_then_forks(
    runs: list[Path],
) -> None:
    asked: list[int] = []
    replay = asyncio.run(
        tp.replay_session(
            runs[-1],
            agent(changed=1, asked=asked),
            toolset=fetch_toolset(),
            chain=True,
            then="live",
        )
    )
    # segment 1's call and turn served; the second call (segment 2's) diverged
    assert (replay.identical, replay.calls, replay.turns, replay.segments) == (False, 1, 1, 3)
    assert replay.forked is not None
    assert replay.forked.forked_from == ForkedFrom(
        run=runs[1].name,
        event=1,
        reason="the agent made an unrecorded call to 'fetch' (occurrence 1); a live call "
        "would be a new run",
    )
    assert (replay.forked.live_calls, replay.forked.live_turns, asked) == (2, 2, [1, 2])
    child = runs[0].parent / replay.forked.run_id
    assert verify_run(child).ok
    runtime = json.loads((child / "runtime.json").read_bytes())
    assert runtime["forked_from"] == {
        "run": runs[1].name,
        "event": 1,
        "reason": replay.forked.forked_from.reason,
        "schema_version": 1,
    }
    # the child holds the whole changed session: it replays frozen on its own
    again = asyncio.run(tp.replay_session(child, agent(changed=1)))
    assert (again.identical, again.calls, again.turns) == (True, 3, 3)


def test_a_chain_the_agent_never_diverges_from_forks_a_copy_naming_the_head(
    runs: list[Path],
) -> None:
    replay = asyncio.run(
        tp.replay_session(runs[-1], agent(), toolset=fetch_toolset(), chain=True, then="live")
    )
    assert (replay.identical, replay.calls, replay.turns) == (True, 3, 3)
    assert replay.forked is not None
    assert replay.forked.forked_from == ForkedFrom(
        run=runs[-1].name,
        event=None,
        reason="no divergence: the agent asked only what the recording holds",
    )
    assert (replay.forked.live_calls, replay.forked.live_turns) == (0, 0)


def test_then_live_still_needs_the_toolset(runs: list[Path]) -> None:
    with pytest.raises(tp.InputError) as refused:
        asyncio.run(tp.replay_session(runs[-1], agent(), chain=True, then="live"))
    assert refused.value.message == (
        "then='live' calls the tools live after the fork: it needs toolset= (the Toolset or "
        "toolproof.toml; toolproof replay --then-live --config)"
    )
