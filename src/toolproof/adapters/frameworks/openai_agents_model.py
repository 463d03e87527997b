"""An OpenAI Agents SDK ``Model`` whose every turn is recorded (imported only when asked for).

:class:`RecordedAgentsModel` implements the SDK's ``Model`` interface around another
``Model``. Each ``get_response`` is one model turn of the session:

* the request is every argument but ``tracing``, as JSON: ``system_instructions``,
  ``input`` (the Responses-format items), ``model_settings`` (``to_json_dict()``),
  ``tools`` (name, description, schema and strictness of each; the callables are not
  data), ``output_schema`` (name, JSON schema, strictness), ``handoffs`` (tool name,
  description, input schema, agent), ``previous_response_id``, ``conversation_id``
  and ``prompt``, by the redaction policy (:mod:`toolproof.redaction`): the model
  settings by its whole JSON rule (``extra_headers`` ``Authorization``, ``extra_query``
  ``key``, ``extra_body`` ``api_key``... become ``REDACTED:sha256:<16 hex>``), the rest
  by its URL rule (a whole-URL string loses its userinfo and secret parameters);
* the response is ``{"output", "usage", "response_id", "request_id"}``: the output
  items as the ``openai`` SDK's models dump them (the fields that were set), the usage
  as the Agents SDK serializes it;
* live, the wrapped model is asked and both are recorded before the response is handed
  back; frozen, the recorded response for the same request and occurrence is served,
  rebuilt into the SDK's own types, and the wrapped model is never asked.

``stream_response`` (``Runner.run_streamed``) is a model turn too, with the same request
and match key:

* live, each event of the wrapped model's stream is handed on as it arrives, and when
  the stream ends the turn is recorded: the exact streamed bytes
  (:func:`stream_event_bytes` of each event, one JSON line each) as ``model_stream``
  evidence with each event's size in ``detail.stream.chunks``, and the assembled
  response in the form above: the ``response.completed`` event's output (else the
  items of the ``response.output_item.done`` events, as the Runner takes them), its
  usage and id. A stream the Runner stops reading before its end is not recorded;
* frozen, the recorded events are parsed back (the SDK's ``TResponseStreamEvent``)
  and yielded one per recorded chunk; a turn recorded whole (``Runner.run``) is
  refused as a stream (rule ``streaming``), and a streamed turn asked whole is served
  its assembled response.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.usage import deserialize_usage, serialize_usage
from openai.types.responses import ResponseCompletedEvent, ResponseOutputItemDoneEvent
from pydantic import BaseModel, TypeAdapter

from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest
from toolproof.redaction import redact_json
from toolproof.runs.normal_form import framework_detail
from toolproof.runs.recorded import stream_detail
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import value_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "SOURCE",
    "RecordedAgentsModel",
    "response_bytes",
    "response_from",
    "stream_event_bytes",
    "streamed_response",
]

SOURCE = "openai-agents"
"""The ``source`` of the turns this model records."""

_OUTPUT: TypeAdapter[list[TResponseOutputItem]] = TypeAdapter(list[TResponseOutputItem])
_EVENT: TypeAdapter[TResponseStreamEvent] = TypeAdapter(TResponseStreamEvent)
"""The adapter frozen replay parses a recorded chunk (one stream event) back with."""


def _plain(value: Any) -> Any:
    """A JSON value for SDK data: models dumped, dataclasses by field, containers walked."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def _tool(tool: Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(tool).__name__, "name": getattr(tool, "name", "")}
    for name in ("description", "params_json_schema", "strict_json_schema"):
        if hasattr(tool, name):
            out[name] = _plain(getattr(tool, name))
    return out


def _output_schema(schema: AgentOutputSchemaBase | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    plain = schema.is_plain_text()
    return {
        "name": schema.name(),
        "plain_text": plain,
        "json_schema": None if plain else schema.json_schema(),
        "strict": schema.is_strict_json_schema(),
    }


def _handoff(handoff: Handoff[Any, Any]) -> dict[str, Any]:
    return {
        "tool_name": handoff.tool_name,
        "tool_description": handoff.tool_description,
        "input_json_schema": _plain(handoff.input_json_schema),
        "agent_name": handoff.agent_name,
    }


def response_bytes(response: ModelResponse) -> bytes:
    """The canonical JSON of a ``ModelResponse`` (see the module docstring)."""
    return canonical_json(
        {
            "output": [
                item.model_dump(mode="json", exclude_unset=True) for item in response.output
            ],
            "usage": serialize_usage(response.usage),
            "response_id": response.response_id,
            "request_id": response.request_id,
        }
    )


def response_from(data: bytes) -> ModelResponse:
    """A ``ModelResponse`` rebuilt from :func:`response_bytes`' bytes."""
    plain = json.loads(data)
    return ModelResponse(
        output=_OUTPUT.validate_python(plain["output"]),
        usage=deserialize_usage(plain.get("usage") or {}),
        response_id=plain.get("response_id"),
        request_id=plain.get("request_id"),
    )


def stream_event_bytes(event: TResponseStreamEvent) -> bytes:
    """One recorded chunk of an Agents SDK stream: an event as one canonical JSON line.

    Args:
        event: a Responses-format stream event (``response.created``,
            ``response.output_text.delta``, ``response.completed``...) as the model
            yielded it.

    Returns:
        RFC 8785 canonical JSON of ``event.model_dump(mode="json", exclude_unset=True)``
        (the fields that were set), whole-URL strings through the URL rule of
        :func:`toolproof.redaction.redact_json`, then a newline (``0x0A``).

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    dumped = redact_json(event.model_dump(mode="json", exclude_unset=True), fields=False)
    return canonical_json(dumped) + b"\n"


def streamed_response(events: list[TResponseStreamEvent]) -> ModelResponse:
    """The ``ModelResponse`` a stream's events assemble into, as the Runner takes it.

    Args:
        events: the stream's events, in order.

    Returns:
        The ``response.completed`` event's output (when it has none: the items of the
        ``response.output_item.done`` events, in order), its usage (one request, its
        token counts; none reported: an empty ``Usage``) and its id; no
        ``response.completed``: those items, an empty usage, no id.

    """
    done = [event.item for event in events if isinstance(event, ResponseOutputItemDoneEvent)]
    completed = next(
        (event.response for event in events if isinstance(event, ResponseCompletedEvent)), None
    )
    if completed is None:
        return ModelResponse(output=done, usage=Usage(), response_id=None)
    usage = Usage()
    if completed.usage is not None:
        reported = completed.usage
        usage = Usage(
            requests=1,
            input_tokens=reported.input_tokens,
            output_tokens=reported.output_tokens,
            total_tokens=reported.total_tokens,
            input_tokens_details=reported.input_tokens_details,
            output_tokens_details=reported.output_tokens_details,
        )
    return ModelResponse(
        output=list(completed.output) or done, usage=usage, response_id=completed.id
    )


def _request_and_key(
    system_instructions: str | None,
    input: str | list[TResponseInputItem],
    model_settings: ModelSettings,
    tools: list[Tool],
    output_schema: AgentOutputSchemaBase | None,
    handoffs: list[Handoff[Any, Any]],
    *,
    previous_response_id: str | None,
    conversation_id: str | None,
    prompt: Any | None,
) -> tuple[bytes, bytes]:
    """A request's canonical JSON (see the module docstring) and its match key."""
    asked = {
        "system_instructions": system_instructions,
        "input": _plain(input),
        "tools": [_tool(tool) for tool in tools],
        "output_schema": _output_schema(output_schema),
        "handoffs": [_handoff(handoff) for handoff in handoffs],
        "previous_response_id": previous_response_id,
        "conversation_id": conversation_id,
        "prompt": _plain(prompt),
    }
    value = {
        **redact_json(asked, fields=False),
        "model_settings": redact_json(_plain(model_settings.to_json_dict())),
    }
    # the key is the request's normal form (docs/agents.md)
    return canonical_json(value), value_key(SOURCE, value)


class RecordedAgentsModel(Model):
    """``wrapped`` with every turn recorded in (or served from) ``session``.

    Args:
        wrapped: the SDK ``Model`` to ask live.
        session: the session recording the turns.

    """

    def __init__(self, wrapped: Model, session: SessionPort) -> None:
        self.wrapped = wrapped
        self.session = session

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        """Ask the wrapped model (recorded) or serve the recorded response (frozen).

        Raises:
            ReplayRefused: frozen, and no recorded turn has this request.
            RecordingError: live, and the turn cannot be recorded.

        """
        request, key = _request_and_key(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        recorded = self.session.known_turn(SOURCE, key)
        if recorded is not None:
            return response_from(recorded.response)
        step = self.session.admit_turn(SOURCE)
        model = self._model_name()
        with hooks.model_turn(model, provider="openai") as span:
            response = await self.wrapped.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            self._record(span, model, step, request, key, response, None)
        return response

    def _record(
        self,
        span: Any,
        model: str,
        step: str,
        request: bytes,
        key: bytes,
        response: ModelResponse,
        chunks: list[bytes] | None,
    ) -> None:
        """Record one turn (``chunks``: a streamed turn's events' bytes) under ``span``."""
        detail: dict[str, Any] = dict(framework_detail(SOURCE))  # the SDK and its version
        if chunks is not None:
            detail = {**detail, "stream": stream_detail(chunks)}
        turn = ModelExchange(
            source=SOURCE,
            model=model,
            request=request,
            response=response_bytes(response),
            key=digest(key),
            detail=detail,
            stream=None if chunks is None else b"".join(chunks),
        )
        turn_recorded(span, self.session.record_turn(turn, step), turn)
        if span is not hooks.NO_SPAN:
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)

    def _model_name(self) -> str:
        """The wrapped model's name (its ``model`` attribute), else its class name."""
        name = getattr(self.wrapped, "model", None)
        return name if isinstance(name, str) else type(self.wrapped).__name__

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Stream the wrapped model (recorded at the stream's end) or the recorded events.

        Yields:
            The stream's events, each as it arrives (live) or one per recorded chunk
            (frozen; see the module docstring).

        Raises:
            ReplayRefused: frozen, and no recorded turn has this request.
            InputError: frozen, and the turn was recorded whole (rule ``streaming``),
                or its recorded chunk sizes do not cut its streamed bytes.
            RecordingError: live, and the turn cannot be recorded.

        """
        request, key = _request_and_key(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        recorded = self.session.known_turn(SOURCE, key)
        if recorded is not None:
            chunks = recorded.chunks()
            if chunks is None:
                raise InputError(
                    "this openai-agents model turn was recorded whole (Runner.run), so it "
                    "has no stream to replay: replay it with Runner.run, or record the "
                    "run again with Runner.run_streamed",
                    rule="streaming",
                )
            for chunk in chunks:
                yield _EVENT.validate_json(chunk)
            return
        step = self.session.admit_turn(SOURCE)
        events: list[TResponseStreamEvent] = []
        live = self.wrapped.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        try:
            async for event in live:
                events.append(event)
                yield event
        finally:  # the Runner stopped reading, or the stream ended: close it now
            close = getattr(live, "aclose", None)
            if close is not None:
                await close()
        # recorded once the stream ended (its span is the recording's, not the stream's)
        model = self._model_name()
        chunks = [stream_event_bytes(event) for event in events]
        response = streamed_response(events)
        with hooks.model_turn(model, provider="openai") as span:
            self._record(span, model, step, request, key, response, chunks)

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.wrapped.close()
