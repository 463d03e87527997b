"""The one session port: what the framework adapters and model recorders need of a session.

:class:`toolproof.Session` is one. The tool adapters (pydantic-ai's ``SessionToolset``,
the Agents SDK's ``FunctionTool`` s, LangChain's ``StructuredTool`` s) use
:meth:`SessionPort.tool_specs`, :meth:`SessionPort.call` and :meth:`SessionPort.is_gated`;
the model recorders (``pydantic_ai_model``, ``openai_agents_model``, ``httpx_transport``)
use :attr:`SessionPort.frozen`, :meth:`SessionPort.known_turn`,
:meth:`SessionPort.admit_turn` and :meth:`SessionPort.record_turn`. Framework-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.identity import digest
from toolproof.runs.recorded import stream_chunks
from toolproof.runs.recorder import ModelExchange
from toolproof.tools import hooks

__all__ = ["Asked", "RecordedTurn", "SessionPort", "turn_recorded"]

Asked = dict[str, Any] | None
"""What a model recorder knows of the asked request's client (an HTTP turn's
``{"client": <User-Agent>}``), which a refusal names beside the recorded turn's."""


@dataclass(frozen=True)
class RecordedTurn:
    """A recorded model turn as a frozen session or a cassette serves it to a model recorder.

    Attributes:
        response: the exact recorded response bytes.
        detail: the ``model_turn`` event's detail (HTTP: status and kept headers).
        exchange: the whole recorded exchange (a frozen session's, which a fork records
            again in its new run), or ``None``.
        stream: a framework's streamed turn: its exact streamed bytes (the
            ``model_stream`` evidence), else ``None``.

    """

    response: bytes
    detail: dict[str, Any]
    exchange: ModelExchange | None = None
    stream: bytes | None = None

    def chunks(self) -> list[bytes] | None:
        """The recorded chunks of a streamed turn, exactly as they arrived; ``None``: a whole turn.

        A framework's stream is cut from :attr:`stream`, an HTTP stream from
        :attr:`response` (its body), at the sizes ``detail.stream.chunks`` records
        (:func:`~toolproof.runs.recorded.stream_chunks`).

        Raises:
            InputError: the recorded sizes do not cut those bytes.

        """
        data = self.response if self.stream is None else self.stream
        return stream_chunks(data, self.detail)


class SessionPort(Protocol):
    """Records (or serves frozen) an agent's tool calls and model turns.

    A model recorder asks :meth:`known_turn` first; when it returns ``None`` it calls
    :meth:`admit_turn`, asks the model, and hands the exchange and the admitted step to
    :meth:`record_turn`.
    """

    @property
    def frozen(self) -> bool:
        """Whether results are served from a recording (no tool body runs, no model is asked)."""
        ...

    def tool_specs(self) -> list[ToolSpec]:
        """The specs of every exposed tool and variant, schemas exactly as bound."""
        ...

    def is_gated(self, name: str) -> bool:
        """Whether tool ``name`` is gated by ``approve`` (a deferral becomes the framework's)."""
        ...

    async def call(
        self, name: str, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """One recorded (or frozen) call; a failure is a result.

        ``model_call_id``: the id the agent's model gave the call, recorded with it.
        """
        ...

    def known_turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn | None:
        """The recorded turn to serve for match key ``key``.

        ``None``: ask the model live (a live session; a cassette recording new episodes
        that holds no unserved turn with this key). Frozen, a request that matches no
        recorded turn raises (``ReplayRefused``, or ``InputError`` for a cassette).
        ``asked``: the asked request's client (:data:`Asked`).
        """
        ...

    def admit_turn(self, source: str) -> str:
        """Refuse, before the model is asked, a live turn that could not be recorded.

        Returns the step the turn will be recorded as, numbered in the order turns are
        asked.
        """
        ...

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """Record one live turn under ``step`` (what :meth:`admit_turn` returned)."""
        ...


def turn_recorded(span: hooks.Span, step: str, turn: ModelExchange) -> None:
    """Link a model-turn span (:func:`toolproof.tools.hooks.model_turn`) to its evidence.

    Sets ``toolproof.step`` (the model step's id), ``toolproof.turn.source`` and the
    ``sha256:`` digests of the exact request and response bytes stored as evidence
    items (``toolproof.request_digest``, ``toolproof.response_digest``); nothing
    with telemetry off.
    """
    if span is hooks.NO_SPAN:
        return
    span.set_attribute("toolproof.step", step)
    span.set_attribute("toolproof.turn.source", turn.source)
    span.set_attribute("toolproof.request_digest", digest(turn.request))
    span.set_attribute("toolproof.response_digest", digest(turn.response))
