"""What a model recorder needs of a session: one small Protocol, framework-free.

:class:`toolproof.Session` is one; the recorders (``pydantic_ai_model``,
``openai_agents_model``, ``httpx_transport``) take any object of this shape.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolproof.identity import digest
from toolproof.runs.recorder import ModelExchange
from toolproof.tools import hooks

__all__ = ["TurnSession", "turn_recorded"]


class TurnSession(Protocol):
    """Records live model turns, or serves recorded ones.

    A recorder asks :meth:`known_turn` first; when it returns ``None`` it calls
    :meth:`admit_turn`, asks the model, and hands the exchange and the admitted step to
    :meth:`record_turn`.
    """

    @property
    def frozen(self) -> bool:
        """Whether turns are served from a recording (no model is asked)."""
        ...

    def known_turn(self, source: str, key: bytes) -> Any | None:
        """The recorded turn to serve for match key ``key`` (its ``response`` and ``detail``).

        ``None``: ask the model live (a live session; a cassette recording new episodes
        that holds no unserved turn with this key). Frozen, a request that matches no
        recorded turn raises (``ReplayRefused``, or ``InputError`` for a cassette).
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
    ``sha256:`` digests of the exact request and response bytes stored under
    ``evidence/`` (``toolproof.request_digest``, ``toolproof.response_digest``); nothing
    with telemetry off.
    """
    if span is hooks.NO_SPAN:
        return
    span.set_attribute("toolproof.step", step)
    span.set_attribute("toolproof.turn.source", turn.source)
    span.set_attribute("toolproof.request_digest", digest(turn.request))
    span.set_attribute("toolproof.response_digest", digest(turn.response))
