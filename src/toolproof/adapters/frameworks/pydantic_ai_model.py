"""A pydantic-ai ``Model`` whose every turn is recorded (imported only when asked for).

:class:`RecordedModel` is a pydantic-ai ``WrapperModel``: every member it does not
change is the wrapped model's. Each ``request`` is one model turn of the session:

* live: the wrapped model is asked, and the request (``{"messages", "model_settings",
  "parameters"}``: pydantic-ai's ``ModelMessage`` list, settings and
  ``ModelRequestParameters`` dumped by pydantic-ai's own type adapters as JSON) and the
  ``ModelResponse`` are recorded as canonical JSON before the response is handed back;
* by the redaction policy (:mod:`toolproof.redaction`): the settings by its whole JSON
  rule (``extra_headers`` ``Authorization``, ``extra_body`` ``api_key``... become
  ``REDACTED:sha256:<16 hex>``), the messages and parameters by its URL rule (a whole-URL
  string such as a response's ``provider_url`` loses its userinfo and secret
  parameters), and a recorded response's ``provider_url`` by the URL rule too (a frozen
  replay serves that form);
* frozen: the response recorded for the same match key (the request without its
  per-call timestamps and run ids, :mod:`toolproof.runs.turns`) and occurrence (the
  k-th identical request asked gets the k-th one recorded, in the order they were
  asked) is served, rebuilt by pydantic-ai's type adapter; the wrapped model is never
  asked. A cassette recording new episodes serves its known turns the same way.

``request_stream`` (``agent.run_stream``, ``agent.iter`` with ``node.stream``, an
``event_stream_handler``) is a model turn too, recorded and matched as ``request`` is:

* live, the wrapped model's stream is read to its end first (each event as its
  ``StreamedResponse`` yields it), then recorded: the request as above, the assembled
  ``ModelResponse`` (its ``get()``) as the response, in the same form as a whole turn's,
  and the exact streamed bytes (:func:`stream_event_bytes` of each event, one JSON line
  each) as ``model_stream`` evidence with each event's size in ``detail.stream.chunks``.
  The agent is then handed pydantic-ai's ``CompletedStreamedResponse`` replaying those
  events: it sees the same events, in the same chunks, but only once the model finished;
* frozen, the recorded events are parsed back and replayed the same way, one event per
  recorded chunk; a turn recorded whole (``agent.run``) is served as one chunk per part
  (``replay_events=True``), and a streamed turn asked whole is served its assembled
  response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponseStreamEvent,
)
from pydantic_ai.models import (
    CompletedStreamedResponse,
    Model,
    ModelRequestParameters,
    StreamedResponse,
)
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from toolproof.identity import canonical_json, digest
from toolproof.redaction import redact_json, redact_url
from toolproof.runs.normal_form import framework_detail
from toolproof.runs.recorded import stream_detail
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import value_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "SOURCE",
    "RecordedModel",
    "request_and_key",
    "request_bytes",
    "request_value",
    "response_bytes",
    "stream_event_bytes",
]

SOURCE = "pydantic-ai"
"""The ``source`` of the turns this model records."""

_PARAMETERS: TypeAdapter[ModelRequestParameters] = TypeAdapter(ModelRequestParameters)
"""The adapter whose ``dump_python(mode="json")`` a request's ``parameters`` are."""
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
"""The adapter whose ``dump_python(mode="json")`` a recorded response is, and which frozen
replay parses a recorded response with."""
_EVENT: TypeAdapter[ModelResponseStreamEvent] = TypeAdapter(ModelResponseStreamEvent)
"""The adapter of one stream event: a recorded chunk is its ``dump_python(mode="json")``."""


def _settings(value: Any) -> Any:
    """Settings as JSON: plain values kept, anything else (an ``httpx.Timeout``) as its repr."""
    if isinstance(value, dict):
        return {str(k): _settings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_settings(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def request_bytes(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> bytes:
    """The canonical JSON of one pydantic-ai request (see the module docstring).

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    return canonical_json(request_value(messages, model_settings, parameters))


def request_and_key(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> tuple[bytes, bytes]:
    """A request's canonical JSON and its match key (:func:`~toolproof.runs.turns.turn_key`).

    Returns:
        ``(request, key)``: ``canonical_json`` of :func:`request_value`, and
        :func:`~toolproof.runs.turns.value_key` of it (the per-call fields dropped).

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    value = _asked(messages, model_settings, parameters)
    data = canonical_json(value)
    if model_settings or b"://" in data:  # else nothing to redact: no walk, no re-encoding
        shown = _redacted(value)
        if shown is not value:
            value, data = shown, canonical_json(shown)
    return data, value_key(SOURCE, value)


def response_bytes(response: ModelResponse) -> bytes:
    """The canonical JSON of one pydantic-ai response: the evidence bytes of a turn's answer.

    Args:
        response: the ``ModelResponse`` the wrapped model returned.

    Returns:
        RFC 8785 canonical JSON of ``TypeAdapter(ModelResponse).dump_python(mode="json")``
        with ``provider_url`` through :func:`toolproof.redaction.redact_url` (frozen
        replay parses these bytes back with the same adapter).

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    dumped = _RESPONSE.dump_python(response, mode="json")
    if isinstance(dumped.get("provider_url"), str):
        dumped["provider_url"] = redact_url(dumped["provider_url"])
    return canonical_json(dumped)


def stream_event_bytes(event: ModelResponseStreamEvent) -> bytes:
    """One recorded chunk of a pydantic-ai stream: an event as one canonical JSON line.

    Args:
        event: a ``ModelResponseStreamEvent`` as the model's ``StreamedResponse``
            yields it (``PartStartEvent``, ``PartDeltaEvent``, ``PartEndEvent``,
            ``FinalResultEvent``...; an agent stamps an ``origin`` on the events it
            hands on: set it to ``None`` to compare one with a recorded chunk).

    Returns:
        RFC 8785 canonical JSON of ``TypeAdapter(ModelResponseStreamEvent)
        .dump_python(event, mode="json")``, whole-URL strings through the URL rule of
        :func:`toolproof.redaction.redact_json`, then a newline (``0x0A``).

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    dumped = redact_json(_EVENT.dump_python(event, mode="json"), fields=False)
    return canonical_json(dumped) + b"\n"


def request_value(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> dict[str, Any]:
    """The plain JSON value :func:`request_bytes` encodes.

    Args:
        messages: the request's messages (dumped by ``ModelMessagesTypeAdapter``).
        model_settings: its settings (plain values kept, others as their repr).
        parameters: its parameters (dumped by ``TypeAdapter(ModelRequestParameters)``).

    Returns:
        ``{"messages", "model_settings", "parameters"}``, each ``dump_python(mode="json")``
        and redacted: the settings by :func:`toolproof.redaction.redact_json`, the
        messages and parameters by its URL rule only (``fields=False``).

    """
    return _redacted(_asked(messages, model_settings, parameters))


def _asked(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> dict[str, Any]:
    """The request as pydantic-ai's adapters dump it, not yet redacted."""
    return {
        "messages": ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
        "model_settings": _settings(model_settings),
        "parameters": _PARAMETERS.dump_python(parameters, mode="json"),
    }


def _redacted(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` (from :func:`_asked`) redacted; the same object when nothing was."""
    shown = {
        "messages": redact_json(value["messages"], fields=False),
        "model_settings": redact_json(value["model_settings"]),
        "parameters": redact_json(value["parameters"], fields=False),
    }
    same = all(shown[name] is value[name] for name in shown)
    return value if same else shown


class RecordedModel(WrapperModel):
    """``wrapped`` with every turn recorded in (or served from) ``session``.

    Args:
        wrapped: the pydantic-ai model, or a model name pydantic-ai infers one from.
        session: the session recording the turns.

    """

    def __init__(self, wrapped: Model | str, session: SessionPort) -> None:
        super().__init__(wrapped)
        self.session = session

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """Ask the wrapped model (recorded) or serve the recorded response (frozen).

        Raises:
            ReplayRefused: frozen, and no recorded turn has this request's match key.
            RecordingError: live, and the turn cannot be recorded.

        """
        request, key = request_and_key(messages, model_settings, model_request_parameters)
        session = self.session
        recorded = session.known_turn(SOURCE, key)
        if recorded is not None:
            return _RESPONSE.validate_json(recorded.response)
        step = session.admit_turn(SOURCE)
        wrapped = self.wrapped
        with hooks.model_turn(wrapped.model_name, provider=wrapped.system) as span:
            response = await wrapped.request(messages, model_settings, model_request_parameters)
            turn = self._turn(request, response, key)
            turn_recorded(span, session.record_turn(turn, step), turn)
            if span is not hooks.NO_SPAN:
                if response.model_name:
                    span.set_attribute("gen_ai.response.model", response.model_name)
                span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
        return response

    def _turn(
        self,
        request: bytes,
        response: ModelResponse,
        key: bytes,
        chunks: list[bytes] | None = None,
    ) -> ModelExchange:
        """The exchange of one live turn: ``request`` as asked, ``response`` as answered.

        ``chunks``: a streamed turn's events (:func:`stream_event_bytes`), in order.
        """
        detail: dict[str, Any] = dict(framework_detail(SOURCE))  # pydantic-ai, its version
        if chunks is not None:
            detail = {**detail, "stream": stream_detail(chunks)}
        return ModelExchange(
            source=SOURCE,
            model=f"{self.wrapped.system}:{self.wrapped.model_name}",
            request=request,
            response=response_bytes(response),
            key=digest(key),
            detail=detail,
            stream=None if chunks is None else b"".join(chunks),
        )

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """Stream the wrapped model (recorded) or replay the recorded stream (frozen).

        Yields:
            A ``CompletedStreamedResponse`` replaying the turn's events, one per
            recorded chunk (see the module docstring).

        Raises:
            ReplayRefused: frozen, and no recorded turn has this request's match key.
            RecordingError: live, and the turn cannot be recorded.
            InputError: frozen, and the recorded chunk sizes do not cut the streamed bytes.

        """
        request, key = request_and_key(messages, model_settings, model_request_parameters)
        session = self.session
        recorded = session.known_turn(SOURCE, key)
        if recorded is not None:
            chunks = recorded.chunks()
            yield CompletedStreamedResponse(
                _RESPONSE.validate_json(recorded.response),
                model_request_parameters=model_request_parameters,
                replay_events=True
                if chunks is None
                else [_EVENT.validate_json(chunk) for chunk in chunks],
            )
            return
        step = session.admit_turn(SOURCE)
        wrapped = self.wrapped
        with hooks.model_turn(wrapped.model_name, provider=wrapped.system) as span:
            async with wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as live:
                events = [event async for event in live]
                response = live.get()
                parameters = live.model_request_parameters
            chunks = [stream_event_bytes(event) for event in events]
            turn = self._turn(request, response, key, chunks)
            turn_recorded(span, session.record_turn(turn, step), turn)
            if span is not hooks.NO_SPAN:
                if response.model_name:
                    span.set_attribute("gen_ai.response.model", response.model_name)
                span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
        yield CompletedStreamedResponse(
            response, model_request_parameters=parameters, replay_events=events
        )
