"""Content capture off means no values in spans (issue 30 item 4).

With ``capture_content`` off a span carries kinds, names and digests only: no argument
value, result value or exception text in any attribute, event or status description.
With it on, the same runs put those values in the spans. Spans land in the SDK's real
``InMemorySpanExporter``; the failures are real (a body that raises, a result that breaks
its output schema, arguments that break the input schema, a model that raises inside a
recorded agent session).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolproof
from toolproof import Tool, Toolset
from toolproof.adapters.telemetry.instrument import uninstrument

SECRETS = ("BODY-SECRET", "RES-SECRET", "ARG-SECRET", "MODEL-SECRET")


async def echo(word: str, n: int = 0) -> int:
    """Echo a word (its declared result is an integer)."""
    if word == "boom":
        raise RuntimeError("body failed on BODY-SECRET")
    return word  # type: ignore[return-value]  # breaks the output schema on purpose


def _spans(capture_content: bool, tmp_path: Path) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    toolproof.instrument(tracer_provider=provider, capture_content=capture_content)
    try:
        tool = Tool.from_function(echo)
        for arguments in (
            {"word": "boom"},
            {"word": "RES-SECRET"},
            {"word": "x", "n": "ARG-SECRET"},
        ):
            assert asyncio.run(tool.call(arguments)).failure is not None

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            raise RuntimeError("the model failed on MODEL-SECRET")

        async def agent() -> None:
            toolset = Toolset()
            toolset.add(Tool.from_function(echo))
            async with toolproof.record_session(toolset.seal(), root=tmp_path, task="t") as s:
                with pytest.raises(RuntimeError, match="MODEL-SECRET"):
                    await Agent(s.pydantic_ai_model(FunctionModel(respond))).run("hi")
                s.answer("none")

        asyncio.run(agent())
    finally:
        uninstrument()
    return list(exporter.get_finished_spans())


def _texts(span: ReadableSpan) -> list[str]:
    """Every text a span carries: attribute values, event names and attributes, status."""
    texts = [str(value) for value in (span.attributes or {}).values()]
    for event in span.events:
        texts.append(event.name)
        texts.extend(str(value) for value in (event.attributes or {}).values())
    texts.append(span.status.description or "")
    return texts


def _found(spans: list[ReadableSpan]) -> set[str]:
    return {
        secret for span in spans for text in _texts(span) for secret in SECRETS if secret in text
    }


def test_with_content_capture_off_no_span_carries_a_value(tmp_path: Path) -> None:
    spans = _spans(False, tmp_path)
    assert _found(spans) == set()
    failed = {
        (span.name, span.status.description)
        for span in spans
        if span.status.status_code.name == "ERROR"
    }
    assert failed == {
        ("execute_tool echo", "tool_error"),
        ("execute_tool echo", "invalid_result"),
        ("execute_tool echo", "invalid_arguments"),
        ("chat function:respond:", "RuntimeError"),
    }
    assert all(not span.events for span in spans)


def test_with_content_capture_on_the_values_are_in_the_spans(tmp_path: Path) -> None:
    spans = _spans(True, tmp_path)
    assert _found(spans) == set(SECRETS)
    (model,) = [span for span in spans if span.name == "chat function:respond:"]
    assert model.status.description == "RuntimeError: the model failed on MODEL-SECRET"
    assert [event.name for event in model.events] == ["exception"]
