"""Model-turn spans (issue 20 point 2): each recorded turn is a GenAI ``chat`` span linked
to its model step and the digests of its evidence bytes.

pydantic-ai turns come from a ``FunctionModel``; HTTP turns from the ``openai`` SDK
against a real HTTP server on 127.0.0.1 (``llm_support.scripted_model``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from agent_support import record_agent
from agents import Agent as AgentsAgent
from agents import Model, RunConfig, Runner, Usage
from agents import ModelResponse as AgentsResponse
from llm_support import chat_reply, scripted_model
from openai import AsyncOpenAI
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolproof import Session, Tool, Toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.identity import digest


def toolset() -> Toolset:
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item} is a fruit"

    made = Toolset()
    made.add(Tool.from_function(lookup))
    return made.seal()


def record(tmp_path: Path, agent: Any) -> Path:
    return record_agent(toolset(), tmp_path, "What?", agent)


def turns_of(run: Path) -> list[tuple[dict[str, Any], bytes, bytes]]:
    """Each model_turn event with its request and response evidence bytes."""
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    out = []
    for turn in (e for e in events if e["type"] == "model_turn"):
        request, response = [
            RunEvidence.open(run).read(e["evidence"]["id"])
            for e in events
            if e["type"] == "evidence_registered" and e["step"] == turn["step"]
        ]
        out.append((turn, request, response))
    return out


def chats(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    return sorted(spans, key=lambda s: s.start_time or 0)


def test_pydantic_ai_turns_are_chat_spans_linked_to_their_evidence(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"item": "pear"})])
        return ModelResponse(parts=[TextPart('It is "pear is a fruit" [call_1].')])

    async def agent(session: Session) -> None:
        runner = Agent(
            session.pydantic_ai_model(FunctionModel(respond)),
            toolsets=[session.pydantic_ai_toolset()],
        )
        session.answer((await runner.run("What is a pear?")).output)

    run = record(tmp_path, agent)
    recorded = turns_of(run)
    spans = chats(exporter)
    assert [s.name for s in spans] == ["chat function:respond:"] * 2
    for span, (turn, request, response) in zip(spans, recorded, strict=True):
        attributes = dict(span.attributes or {})
        assert span.kind == SpanKind.CLIENT
        assert {k: attributes.pop(k) for k in list(attributes) if k.startswith("gen_ai.usage")}
        assert attributes == {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "function:respond:",
            "gen_ai.provider.name": "function",
            "gen_ai.response.model": "function:respond:",
            "toolproof.step": turn["step"],
            "toolproof.turn.source": "pydantic-ai",
            "toolproof.request_digest": digest(request),
            "toolproof.response_digest": digest(response),
        }


def test_http_turns_are_spans_named_by_the_model_in_the_body(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    with scripted_model(chat_reply("A fruit.")) as server:
        base_url = server.base_url

        async def agent(session: Session) -> None:
            async with httpx.AsyncClient(transport=session.httpx_transport()) as http:
                client = AsyncOpenAI(
                    api_key="sk-test", base_url=base_url, http_client=http, max_retries=0
                )
                done = await client.chat.completions.create(
                    model="scripted", messages=[{"role": "user", "content": "What?"}]
                )
            session.answer(str(done.choices[0].message.content))

        run = record(tmp_path, agent)
    [(turn, request, response)] = turns_of(run)
    [span] = chats(exporter)
    assert (span.name, span.kind, span.status.status_code.name) == (
        "chat scripted",
        SpanKind.CLIENT,
        "UNSET",
    )
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "http.response.status_code": 200,
        "toolproof.step": turn["step"],
        "toolproof.turn.source": "http",
        "toolproof.request_digest": digest(request),
        "toolproof.response_digest": digest(response),
    }


class Answering(Model):
    """An Agents SDK model that answers at once (no tool call)."""

    model = "scripted-agents"

    async def get_response(self, *args: Any, **kwargs: Any) -> AgentsResponse:
        text = ResponseOutputText(type="output_text", text="A fruit.", annotations=[])
        message = ResponseOutputMessage(
            id="m1", type="message", role="assistant", status="completed", content=[text]
        )
        usage = Usage(requests=1, input_tokens=11, output_tokens=3, total_tokens=14)
        return AgentsResponse(output=[message], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_openai_agents_turns_are_chat_spans_with_their_usage(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    async def agent(session: Session) -> None:
        runner = AgentsAgent(name="a", model=session.openai_agents_model(Answering()))
        done = await Runner.run(runner, "What?", run_config=RunConfig(tracing_disabled=True))
        session.answer(str(done.final_output))

    run = record(tmp_path, agent)
    [(turn, request, response)] = turns_of(run)
    [span] = chats(exporter)
    assert span.name == "chat scripted-agents"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted-agents",
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 3,
        "toolproof.step": turn["step"],
        "toolproof.turn.source": "openai-agents",
        "toolproof.request_digest": digest(request),
        "toolproof.response_digest": digest(response),
    }
