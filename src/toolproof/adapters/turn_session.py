"""What a model recorder needs of a session: one small Protocol, framework-free.

:class:`toolproof.Session` is one; the recorders (``pydantic_ai_model``,
``openai_agents_model``, ``httpx_transport``) take any object of this shape.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolproof.runs.recorder import ModelExchange

__all__ = ["TurnSession"]


class TurnSession(Protocol):
    """Records live model turns, or serves recorded ones."""

    @property
    def frozen(self) -> bool:
        """Whether turns are served from a recording (no model is asked)."""
        ...

    def admit_turn(self, source: str) -> None:
        """Refuse, before the model is asked, a live turn that could not be recorded."""
        ...

    def record_turn(self, turn: ModelExchange) -> str:
        """Record one live turn; return its step id."""
        ...

    def serve_turn(self, source: str, key: bytes) -> Any:
        """The recorded turn for match key ``key``: its ``response`` bytes and ``detail``."""
        ...
