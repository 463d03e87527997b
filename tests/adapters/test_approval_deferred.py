"""Defer mode through the frameworks' own deferral, in their real loops.

pydantic-ai: the gated call raises ``ApprovalRequired``; the run ends with
``DeferredToolRequests``; a person decides over the HTTP channel; the run resumed with
``DeferredToolResults`` retries the call with the handle. The OpenAI Agents SDK: the
gated call interrupts the run (``result.interruptions``); after the decision the
approved ``RunState`` resumes it. In both, the side-effect file shows the body ran
exactly once, only after a person approved, and never after a denial.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from agents import Agent as OpenAIAgent
from agents import Model, ModelResponse, RunConfig, Runner, Usage
from approval_support import APPROVER_TOKEN, RUNS_TOKEN, side_effects, write_gated_root
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof.adapters.http import ApiSettings, create_app
from toolproof.adapters.session_runs import AgentReplay
from toolproof.extensions.approvals.store import ApprovalStore
from toolproof.verify.verifier import verify_run


def _decide(folder: Path, handle: str, decision: str) -> dict[str, Any]:
    """A person decides over the HTTP channel (the serve-api app, in process)."""
    settings = ApiSettings(
        root=folder,
        token=RUNS_TOKEN,
        approvals_store=folder / "approvals.sqlite",
        approvers={"alice": APPROVER_TOKEN},
    )

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(
                f"/v1/approvals/{handle}",
                json={"decision": decision},
                headers={"Authorization": f"Bearer {APPROVER_TOKEN}"},
            )

    answer = asyncio.run(go())
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _respond(seen: list[Any]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        if len(messages) == 1:
            call = ToolCallPart("delete_branch_approve", {"branch": "feature"}, tool_call_id="d")
            return PydanticResponse(parts=[call])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        seen.extend(last.parts)
        return PydanticResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def _pydantic_ai_round(tmp_path: Path, decision: str | None) -> tuple[list[Any], list[Any]]:
    """Defer, let a person decide (or not), resume; answer the outputs and the parts seen."""
    config = write_gated_root(tmp_path / "root")
    folder = config.parent
    seen: list[Any] = []
    outputs: list[Any] = []

    async def scenario() -> None:
        async with toolproof.record_session(config, root=tmp_path, task="delete") as session:
            agent = Agent(
                _respond(seen),
                toolsets=[session.pydantic_ai_toolset()],
                output_type=[str, DeferredToolRequests],
            )
            first = await agent.run("Delete feature.")
            outputs.append(first.output)
            assert isinstance(first.output, DeferredToolRequests)
            handle = first.output.metadata["d"]["approval_handle"]
            assert side_effects(folder) == []
            if decision is not None:
                await asyncio.to_thread(_decide, folder, handle, decision)
            resumed = await agent.run(
                message_history=first.all_messages(),
                deferred_tool_results=DeferredToolResults(
                    approvals={"d": True}, metadata=first.output.metadata
                ),
            )
            outputs.append(resumed.output)
            session.answer("done")
        assert session.run_id is not None
        assert verify_run(tmp_path / "runs" / session.run_id).ok

    asyncio.run(scenario())
    return outputs, seen


def test_pydantic_ai_defers_and_the_resumed_run_runs_the_approved_call_once(
    tmp_path: Path,
) -> None:
    outputs, seen = _pydantic_ai_round(tmp_path, "approve")
    first, resumed = outputs
    assert [call.tool_name for call in first.approvals] == ["delete_branch_approve"]
    assert first.metadata["d"]["tool"] == "delete_branch_approve"
    assert first.metadata["d"]["approval_handle"].startswith("apr_")
    assert resumed == "done"
    assert [(p.tool_name, p.content) for p in seen if isinstance(p, ToolReturnPart)] == [
        ("delete_branch_approve", "deleted feature")
    ]
    assert side_effects(tmp_path / "root") == ["feature force=False"]


def test_pydantic_ai_resumed_after_a_denial_tells_the_model_and_runs_nothing(
    tmp_path: Path,
) -> None:
    outputs, seen = _pydantic_ai_round(tmp_path, "deny")
    assert outputs[1] == "done"
    # the ModelRetry of a failed call (pydantic-ai answers it as a retried tool return)
    (denial,) = [p for p in seen if isinstance(p, ToolReturnPart | RetryPromptPart)]
    assert str(denial.content).startswith(
        "approval_denied: call to 'delete_branch_approve' not approved (request apr_"
    )
    assert str(denial.content).endswith(", by alice): denied; the body did not run")
    assert side_effects(tmp_path / "root") == []


def test_pydantic_ai_resumed_without_a_decision_defers_again(tmp_path: Path) -> None:
    outputs, _ = _pydantic_ai_round(tmp_path, None)
    first, resumed = outputs
    assert isinstance(resumed, DeferredToolRequests)
    assert resumed.metadata["d"]["approval_handle"] == first.metadata["d"]["approval_handle"]
    assert side_effects(tmp_path / "root") == []


class _DeleteThenAnswer(Model):
    """An Agents SDK ``Model``: calls ``delete_branch_approve``, then answers what it got."""

    def __init__(self) -> None:
        self.outputs: list[str] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        answered = [
            item["output"]
            for item in (input if isinstance(input, list) else [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        output: list[Any]
        if not answered:
            arguments = json.dumps({"branch": "feature"})
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    name="delete_branch_approve",
                    call_id="d",
                    id="f",
                    arguments=arguments,
                )
            ]
        else:
            self.outputs.extend(str(out) for out in answered)
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            output = [
                ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _agents_round(tmp_path: Path, decision: str) -> tuple[_DeleteThenAnswer, list[str]]:
    config = write_gated_root(tmp_path / "root")
    folder = config.parent
    model = _DeleteThenAnswer()
    interrupted: list[str] = []

    async def scenario() -> None:
        async with toolproof.record_session(config, root=tmp_path, task="delete") as session:
            agent = OpenAIAgent(name="a", tools=session.openai_agents_tools(), model=model)
            run_config = RunConfig(tracing_disabled=True)
            first = await Runner.run(agent, "Delete feature.", run_config=run_config)
            interrupted.extend(item.tool_name or "" for item in first.interruptions)
            assert side_effects(folder) == []
            handle = _only_pending(folder)
            await asyncio.to_thread(_decide, folder, handle, decision)
            state = first.to_state()
            state.approve(first.interruptions[0])
            resumed = await Runner.run(agent, state, run_config=run_config)
            assert resumed.final_output == "done"
            session.answer("done")
        assert session.run_id is not None
        assert verify_run(tmp_path / "runs" / session.run_id).ok

    asyncio.run(scenario())
    return model, interrupted


def _only_pending(folder: Path) -> str:
    (row,) = ApprovalStore(folder / "approvals.sqlite").list(status="pending")
    return row.id


def test_the_agents_sdk_interrupts_and_the_approved_state_runs_the_call_once(
    tmp_path: Path,
) -> None:
    model, interrupted = _agents_round(tmp_path, "approve")
    assert interrupted == ["delete_branch_approve"]
    assert model.outputs == ["deleted feature"]
    assert side_effects(tmp_path / "root") == ["feature force=False"]


def test_the_agents_sdk_resumed_after_a_denial_runs_nothing(tmp_path: Path) -> None:
    model, interrupted = _agents_round(tmp_path, "deny")
    assert interrupted == ["delete_branch_approve"]
    (answer,) = model.outputs
    assert answer.startswith("approval_denied: call to 'delete_branch_approve' not approved")
    assert side_effects(tmp_path / "root") == []


def test_an_agents_sdk_call_the_gate_decides_at_once_runs_once_without_interruption(
    tmp_path: Path,
) -> None:
    config = write_gated_root(tmp_path / "root", mode="wait")
    model = _DeleteThenAnswer()
    asked: list[str] = []

    async def approve(request: Any) -> bool:
        asked.append(request.tool)
        return True

    async def scenario() -> list[Any]:
        async with toolproof.record_session(
            config, root=tmp_path, task="delete", approver=approve
        ) as session:
            agent = OpenAIAgent(name="a", tools=session.openai_agents_tools(), model=model)
            result = await Runner.run(
                agent, "Delete feature.", run_config=RunConfig(tracing_disabled=True)
            )
            session.answer(str(result.final_output))
            return list(result.interruptions)

    assert asyncio.run(scenario()) == []
    assert (asked, model.outputs) == (["delete_branch_approve"], ["deleted feature"])
    assert side_effects(tmp_path / "root") == ["feature force=False"]


def test_a_deferred_pydantic_ai_session_replays_frozen_without_asking_or_running(
    tmp_path: Path,
) -> None:
    config = write_gated_root(tmp_path / "root")
    folder = config.parent
    decide = True

    async def agent(session: toolproof.Session) -> None:
        runner = Agent(
            _respond([]),
            toolsets=[session.pydantic_ai_toolset()],
            output_type=[str, DeferredToolRequests],
        )
        first = await runner.run("Delete feature.")
        assert isinstance(first.output, DeferredToolRequests)
        if decide:  # live only: a person decides; the replay serves what was recorded
            handle = first.output.metadata["d"]["approval_handle"]
            await asyncio.to_thread(_decide, folder, handle, "approve")
        resumed = await runner.run(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(
                approvals={"d": True}, metadata=first.output.metadata
            ),
        )
        session.answer(str(resumed.output))

    async def scenario() -> AgentReplay:
        nonlocal decide
        async with toolproof.record_session(config, root=tmp_path, task="delete") as session:
            await agent(session)
        assert session.run_id is not None
        decide = False
        return await toolproof.replay_session(tmp_path / "runs" / session.run_id, agent)

    replayed = asyncio.run(scenario())
    assert (replayed.identical, replayed.calls, replayed.live_calls) == (True, 2, 0)
    assert side_effects(folder) == ["feature force=False"]  # the live run's only


def test_an_interrupted_agents_sdk_session_replays_frozen_without_running(
    tmp_path: Path,
) -> None:
    config = write_gated_root(tmp_path / "root")
    folder = config.parent
    decide = True

    async def agent(session: toolproof.Session) -> None:
        runner = OpenAIAgent(
            name="a", tools=session.openai_agents_tools(), model=_DeleteThenAnswer()
        )
        run_config = RunConfig(tracing_disabled=True)
        first = await Runner.run(runner, "Delete feature.", run_config=run_config)
        (item,) = first.interruptions
        if decide:  # live only: a person decides; the replay serves what was recorded
            await asyncio.to_thread(_decide, folder, _only_pending(folder), "approve")
        state = first.to_state()
        state.approve(item)
        resumed = await Runner.run(runner, state, run_config=run_config)
        session.answer(str(resumed.final_output))

    async def scenario() -> AgentReplay:
        nonlocal decide
        async with toolproof.record_session(config, root=tmp_path, task="delete") as session:
            await agent(session)
        assert session.run_id is not None
        decide = False
        return await toolproof.replay_session(tmp_path / "runs" / session.run_id, agent)

    replayed = asyncio.run(scenario())
    assert (replayed.identical, replayed.calls, replayed.live_calls) == (True, 2, 0)
    assert side_effects(folder) == ["feature force=False"]
