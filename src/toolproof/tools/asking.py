"""Who answers the questions an MCP server asks during a call: sampling and elicitation.

An imported MCP server may ask its client, while one of its tools runs, for a model
completion (``sampling/createMessage``) or for the user's input
(``elicitation/create``). toolproof can answer only when something is there to ask:

* ``toolproof serve`` relays them to the client it serves (``relay``);
* a Python program gives callbacks: ``load_toolset(..., sample=, elicit=)`` or
  ``record_session(..., sample=, elicit=)``.

:class:`Askers` holds what a Toolset has; an ``[[mcp]]`` client announces the
``sampling`` and ``elicitation`` capabilities only when it holds the matching one, so a
server never offers tools that would ask a client that cannot answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolproof.tools.resources import ResourceKey

__all__ = ["ASKERS", "Ask", "Askers"]

Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""A callback answering one question, MCP wire form (camelCase JSON): ``sample`` gets
``CreateMessageRequestParams`` and returns a ``CreateMessageResult``; ``elicit`` gets
``ElicitRequestParams`` and returns an ``ElicitResult``."""


@dataclass(frozen=True)
class Askers:
    """Who answers a server's sampling and elicitation requests for one Toolset.

    Attributes:
        sample: the ``sampling/createMessage`` callback, or ``None``.
        elicit: the ``elicitation/create`` callback, or ``None``.
        relay: ``toolproof serve`` relays both to the client it serves.

    """

    sample: Ask | None = None
    elicit: Ask | None = None
    relay: bool = False

    @property
    def can_sample(self) -> bool:
        """Whether ``sampling`` is announced to the servers."""
        return self.relay or self.sample is not None

    @property
    def can_elicit(self) -> bool:
        """Whether ``elicitation`` is announced to the servers."""
        return self.relay or self.elicit is not None


ASKERS = ResourceKey[Askers]("mcp.askers")
"""The Toolset's :class:`Askers` (absent: nobody answers, nothing is announced)."""
