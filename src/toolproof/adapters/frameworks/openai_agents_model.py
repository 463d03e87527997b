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

``stream_response`` is refused (streamed turns are not recorded yet): use
``Runner.run`` rather than ``Runner.run_streamed``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseInputItem, TResponseOutputItem
from agents.usage import deserialize_usage, serialize_usage
from pydantic import BaseModel, TypeAdapter

from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest
from toolproof.redaction import redact_json
from toolproof.runs.normal_form import framework_detail
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import value_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = ["SOURCE", "RecordedAgentsModel", "response_bytes", "response_from"]

SOURCE = "openai-agents"
"""The ``source`` of the turns this model records."""

_OUTPUT: TypeAdapter[list[TResponseOutputItem]] = TypeAdapter(list[TResponseOutputItem])


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
        request = canonical_json(value)
        key = value_key(SOURCE, value)  # the request's normal form (docs/agents.md)
        recorded = self.session.known_turn(SOURCE, key)
        if recorded is not None:
            return response_from(recorded.response)
        step = self.session.admit_turn(SOURCE)
        name = getattr(self.wrapped, "model", None)
        model = name if isinstance(name, str) else type(self.wrapped).__name__
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
            turn = ModelExchange(
                source=SOURCE,
                model=model,
                request=request,
                response=response_bytes(response),
                key=digest(key),
                detail=framework_detail(SOURCE),  # the SDK and its version
            )
            turn_recorded(span, self.session.record_turn(turn, step), turn)
            if span is not hooks.NO_SPAN:
                span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Refused: streamed turns are not recorded yet.

        Raises:
            InputError: always; use ``Runner.run`` instead of ``Runner.run_streamed``.

        """
        raise InputError(
            "session.openai_agents_model() records whole turns only: a streamed response "
            "(Runner.run_streamed) is not recorded; use Runner.run",
            rule="streaming",
        )

    async def close(self) -> None:
        """Close the wrapped model."""
        await self.wrapped.close()
