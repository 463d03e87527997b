"""A real LangChain v1 agent loop (``create_agent``) recorded, verified and replayed frozen."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage

import toolproof
from toolproof import ReplayRefused, Session, Tool, Toolset
from toolproof.verify.verifier import verify_run


class _ToolCallingFake(GenericFakeChatModel):
    """LangChain's scripted chat model; tools are bound by the agent, the script decides."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self


def _toolset(bodies: list[str]) -> Toolset:
    async def lookup(item: str) -> dict[str, Any]:
        """Look an item up."""
        bodies.append(item)
        return {"item": item, "note": f"{item} is ripe"}

    toolset = Toolset()
    toolset.add(Tool.from_function(lookup))
    return toolset.seal()


def _script(item: str) -> Iterator[BaseMessage]:
    return iter(
        [
            AIMessage(
                content="",
                tool_calls=[
                    {"name": "lookup", "args": {"item": item}, "id": "t1", "type": "tool_call"},
                    {"name": "lookup", "args": {"item": item}, "id": "t2", "type": "tool_call"},
                ],
            ),
            AIMessage(content='The store says "pear is ripe" [call_1].'),
        ]
    )


def _agent(item: str) -> Callable[[Session], Coroutine[Any, Any, None]]:
    async def agent(session: Session) -> None:
        graph = create_agent(_ToolCallingFake(messages=_script(item)), session.langchain_tools())
        state = await graph.ainvoke({"messages": [("user", "Is the pear ripe?")]})
        session.answer(str(state["messages"][-1].content))

    return agent


def test_a_langchain_agent_records_verifies_and_replays_frozen(tmp_path: Path) -> None:
    bodies: list[str] = []

    async def go() -> str:
        async with toolproof.record_session(
            _toolset(bodies), root=tmp_path, task="Is the pear ripe?"
        ) as session:
            await _agent("pear")(session)
        assert session.run_id is not None
        return session.run_id

    run = tmp_path / "runs" / asyncio.run(go())
    assert bodies == ["pear", "pear"]  # two identical calls, both run and recorded
    assert verify_run(run).ok
    (claim,) = json.loads((run / "claims.json").read_bytes())
    assert (claim["status"], [c["text"] for c in claim["citations"]]) == (
        "validated",
        ["pear is ripe"],
    )
    replay = asyncio.run(toolproof.replay_session(run, _agent("pear"), toolset=_toolset(bodies)))
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 2, 0)
    assert bodies == ["pear", "pear"]
    with pytest.raises(ReplayRefused, match="an unrecorded call to 'lookup'"):
        asyncio.run(toolproof.replay_session(run, _agent("plum"), toolset=_toolset(bodies)))


def test_a_frozen_replay_without_the_toolset_serves_the_recorded_tools(tmp_path: Path) -> None:
    # an older run, which stores no tools, still needs toolset= (test_agent_self_contained)
    async def go() -> str:
        async with toolproof.record_session(_toolset([]), root=tmp_path, task="?") as session:
            await _agent("pear")(session)
        assert session.run_id is not None
        return session.run_id

    run = tmp_path / "runs" / asyncio.run(go())
    replay = asyncio.run(toolproof.replay_session(run, _agent("pear")))
    assert (replay.identical, replay.calls, replay.live_calls) == (True, 2, 0)
    with pytest.raises(ReplayRefused, match="an unrecorded call to 'lookup'"):
        asyncio.run(toolproof.replay_session(run, _agent("plum")))
