"""A pydantic-ai ``Model`` whose every turn is recorded (imported only when asked for).

:class:`RecordedModel` is a pydantic-ai ``WrapperModel``: every member it does not
change is the wrapped model's. Each ``request`` is one model turn of the session:

* live: the wrapped model is asked, and the request (``{"messages", "model_settings",
  "parameters"}``: pydantic-ai's ``ModelMessage`` list, settings and
  ``ModelRequestParameters`` dumped by pydantic-ai's own type adapters as JSON) and the
  ``ModelResponse`` are recorded as canonical JSON before the response is handed back;
* frozen: the response recorded for the same match key (the request without its
  per-call timestamps and run ids, :mod:`toolproof.runs.turns`) and occurrence (the
  k-th identical request asked gets the k-th one recorded, in the order they were
  asked) is served, rebuilt by pydantic-ai's type adapter; the wrapped model is never
  asked. A cassette recording new episodes serves its known turns the same way.

``request_stream`` is refused (streamed turns are not recorded yet): run the agent
with ``agent.run`` rather than ``run_stream``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from toolproof.adapters.pydantic_ai_json import RESPONSE_ADAPTER, messages_json, response_json
from toolproof.errors import CanonicalizationError, InputError
from toolproof.identity import canonical_json, digest
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import pydantic_ai_request
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "SOURCE",
    "RecordedModel",
    "request_and_key",
    "request_bytes",
    "request_value",
    "response_bytes",
]

SOURCE = "pydantic-ai"
"""The ``source`` of the turns this model records."""

_PARAMETERS: TypeAdapter[ModelRequestParameters] = TypeAdapter(ModelRequestParameters)
_dump_parameters = _PARAMETERS.serializer.to_python
"""``_PARAMETERS.dump_python`` without its wrapper: the same call, every option at its default."""


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
    return request_and_key(messages, model_settings, parameters)[0]


def request_and_key(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> tuple[bytes, bytes]:
    """A request's canonical JSON and its match key (:func:`~toolproof.runs.turns.turn_key`).

    The messages are dumped leanly (:mod:`toolproof.adapters.pydantic_ai_json`); when
    that dump has no canonical form, the adapter's own dump decides: the same bytes, or
    the adapter's error.

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    try:
        value = request_value(messages, model_settings, parameters)
        return pydantic_ai_request(value, spend=True)
    except CanonicalizationError:
        value = request_value(messages, model_settings, parameters, lean=False)
        return pydantic_ai_request(value, spend=True)


def response_bytes(response: ModelResponse) -> bytes:
    """The canonical JSON of one pydantic-ai response: the evidence bytes of a turn's answer.

    Args:
        response: the ``ModelResponse`` the wrapped model returned.

    Returns:
        RFC 8785 canonical JSON of ``TypeAdapter(ModelResponse).dump_python(mode="json")``
        (frozen replay parses these bytes back with the same adapter), dumped leanly
        (:mod:`toolproof.adapters.pydantic_ai_json`); when that dump has no canonical
        form, the adapter's own dump decides: the same bytes, or the adapter's error.

    Raises:
        CanonicalizationError: a value has no canonical JSON form.

    """
    try:
        return canonical_json(response_json(response))
    except CanonicalizationError:
        return canonical_json(RESPONSE_ADAPTER.dump_python(response, mode="json"))


def request_value(
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    *,
    lean: bool = True,
) -> dict[str, Any]:
    """The plain JSON value :func:`request_bytes` encodes.

    Args:
        messages: the request's messages.
        model_settings: its settings.
        parameters: its parameters.
        lean: dump the messages with :func:`~toolproof.adapters.pydantic_ai_json.messages_json`
            (``False``: with ``ModelMessagesTypeAdapter`` itself).

    """
    return {
        "messages": messages_json(messages)
        if lean
        else ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
        "model_settings": _settings(model_settings),
        "parameters": _dump_parameters(parameters, mode="json"),
    }


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
            return RESPONSE_ADAPTER.validate_json(recorded.response)
        step = session.admit_turn(SOURCE)
        wrapped = self.wrapped
        if hooks.ACTIVE is None:  # telemetry off: model_turn would hand out NO_SPAN
            response = await wrapped.request(messages, model_settings, model_request_parameters)
            session.record_turn(self._turn(request, response, key), step)
            return response
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

    def _turn(self, request: bytes, response: ModelResponse, key: bytes) -> ModelExchange:
        """The exchange of one live turn: ``request`` as asked, ``response`` as answered."""
        return ModelExchange.built(
            source=SOURCE,
            model=f"{self.wrapped.system}:{self.wrapped.model_name}",
            request=request,
            response=response_bytes(response),
            key=digest(key),
        )

    @asynccontextmanager
    async def request_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[StreamedResponse]:
        """Refused: streamed turns are not recorded yet.

        Raises:
            InputError: always; use ``agent.run`` instead of ``run_stream``.

        """
        raise InputError(
            "session.pydantic_ai_model() records whole turns only: a streamed request "
            "(agent.run_stream, an event_stream_handler) is not recorded; use agent.run",
            rule="streaming",
        )
        yield  # pragma: no cover - makes this an async generator


_NO_OP_BOUNDARIES = frozenset(
    {
        "_within_request_download_budget.<locals>.budgeted",
        "Model._restore_special_tokens_at_the_model_boundary.<locals>.restoring_request",
    }
)
"""The wrappers pydantic-ai puts around every model class's ``request`` that do nothing for
a wrapper: the download budget (the wrapped model's own ``request`` opens a fresh one for
the downloads it makes; this one makes none) and the special-token restoring (off for a
``WrapperModel``, whose ``_answers_requests_itself`` is false; the wrapped model's own
restores its answer)."""


def _unwrapped(method: Any) -> Any:
    """``method`` without pydantic-ai's :data:`_NO_OP_BOUNDARIES` (about 6 us a turn).

    Args:
        method: a model class's ``request`` as pydantic-ai's ``__init_subclass__`` left it.

    Returns:
        The function under the wrappers, each known by its code's qualified name and
        module (``functools.wraps`` copied the wrapped one's names onto it); ``method``
        itself when any wrapper of its ``__wrapped__`` chain is another one (a
        pydantic-ai version that adds a boundary keeps all of them).

    """
    inner = method
    while hasattr(inner, "__wrapped__"):
        code = getattr(inner, "__code__", None)  # functools.wraps copied the names over
        where = getattr(inner, "__globals__", {}).get("__name__")
        if (
            code is None
            or where != "pydantic_ai.models"
            or code.co_qualname not in _NO_OP_BOUNDARIES
        ):
            return method
        inner = inner.__wrapped__
    return inner


RecordedModel.request = _unwrapped(RecordedModel.request)  # type: ignore[method-assign]
