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

import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolproof.contract.tools import ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureWhere
from toolproof.tools.resources import ResourceKey

__all__ = ["ASKERS", "Ask", "Askers", "AskingChannel", "relayed_entry"]

logger = logging.getLogger("toolproof.tool")
_PY_LEVELS = {"debug": 10, "info": 20, "notice": 20, "warning": 30, "error": 40}

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

    @property
    def answers(self) -> bool:
        """Whether there is a Python callback (not only ``serve``'s relay)."""
        return self.sample is not None or self.elicit is not None

    def over(self, base: Askers | None) -> Askers:
        """These callbacks, each missing one taken from ``base`` (a session's over a Toolset's)."""
        if base is None:
            return self
        return Askers(
            sample=self.sample or base.sample,
            elicit=self.elicit or base.elicit,
            relay=self.relay or base.relay,
        )


ASKERS = ResourceKey[Askers]("mcp.askers")
"""The Toolset's :class:`Askers` (absent: nobody answers, nothing is announced)."""


class AskingChannel:
    """A call channel that answers sampling and elicitation with :class:`Askers` callbacks.

    It is the channel of a call made outside ``toolproof serve`` when the Toolset (or
    the recording session) has callbacks: an imported MCP server's questions, and a
    Python tool's ``Context.sample`` / ``Context.elicit``, reach them. Each question and
    its answer (or why there is none) is appended to ``relayed`` (``method``,
    ``request``, ``answer``, ``error``): a recording session records them as
    ``request_relayed`` events, with their bytes as evidence, in the call's block.

    Args:
        askers: the callbacks.
        relayed: where each question is noted, or ``None``.

    """

    def __init__(self, askers: Askers, relayed: list[dict[str, Any]] | None = None) -> None:
        self.askers = askers
        self._relayed = relayed

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        """A log message: to the ``toolproof.tool`` logger, as without a channel."""
        logger.log(_PY_LEVELS.get(level, 50), "%s", data)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Progress: dropped (nobody asked for it)."""

    async def sample(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """``sampling/createMessage``: the ``sample`` callback's ``CreateMessageResult``."""
        return await self._ask("sampling/createMessage", "sample", self.askers.sample, request)

    async def elicit(self, request: dict[str, Any], key: str | None = None) -> dict[str, Any]:
        """``elicitation/create``: the ``elicit`` callback's ``ElicitResult``."""
        return await self._ask("elicitation/create", "elicit", self.askers.elicit, request)

    async def list_roots(self, key: str | None = None) -> dict[str, Any]:
        """``roots/list``: only ``toolproof serve``'s relay answers it (no callback exists).

        Raises:
            ToolCallError: kind ``unavailable``, always.

        """
        failed = _failed(
            FailureKind.UNAVAILABLE, "roots/list needs a client to ask: toolproof serve's relay"
        )
        self._note("roots/list", {}, None, failed)
        raise failed

    def client_capabilities(self) -> None:
        """``None``: no client of its own (toolproof's client announces what callbacks answer)."""
        return None

    def note_missing(self, capabilities: dict[str, Any]) -> None:
        """Ignored: the call's failure says it (no client of its own to answer -32021)."""

    async def _ask(
        self, method: str, name: str, ask: Ask | None, request: dict[str, Any]
    ) -> dict[str, Any]:
        """Ask ``ask``; note the question and the answer.

        Raises:
            ToolCallError: kind ``unavailable`` when there is no ``name`` callback;
                ``tool_error`` when it raised or answered something not a JSON object.

        """
        asked = copy.deepcopy(request)
        if ask is None:
            failed = _failed(
                FailureKind.UNAVAILABLE,
                f"{method} needs a {name!r} callback (load_toolset/record_session {name}=)",
            )
            self._note(method, asked, None, failed)
            raise failed
        try:
            answer = await ask(request)
        except ToolCallError as exc:
            self._note(method, asked, None, exc)
            raise
        except Exception as exc:  # the user's callback: its failure is the call's
            failed = _failed(
                FailureKind.TOOL_ERROR,
                f"the {name!r} callback raised {type(exc).__name__}: {exc}",
            )
            self._note(method, asked, None, failed)
            raise failed from exc
        if not isinstance(answer, dict):
            failed = _failed(
                FailureKind.TOOL_ERROR,
                f"the {name!r} callback answered {type(answer).__name__}, not a JSON object "
                f"(the {method} result, MCP wire form)",
            )
            self._note(method, asked, None, failed)
            raise failed
        self._note(method, asked, copy.deepcopy(answer), None)
        return answer

    def _note(
        self,
        method: str,
        request: dict[str, Any],
        answer: dict[str, Any] | None,
        failed: ToolCallError | None,
    ) -> None:
        if self._relayed is not None:
            self._relayed.append(relayed_entry(method, request, answer, failed))


def relayed_entry(
    method: str,
    request: dict[str, Any],
    answer: dict[str, Any] | None,
    failed: ToolCallError | None,
) -> dict[str, Any]:
    """One question a server asked during a call and what it got, as the recorder keeps it.

    Args:
        method: the MCP method asked (``sampling/createMessage``, ``elicitation/create``).
        request: its params, MCP wire form.
        answer: the answer's result, MCP wire form; ``None`` when it failed.
        failed: the call's failure when answering failed, else ``None``.

    Returns:
        ``{"method", "request", "answer", "error"}``; ``error`` is ``"KIND: message"`` of
        ``failed``, or ``""``. Each becomes a ``request_relayed`` event of the call's block.

    """
    error = f"{failed.failure.kind}: {failed.failure.message}" if failed is not None else ""
    return {"method": method, "request": request, "answer": answer, "error": error}


def _failed(kind: FailureKind, message: str) -> ToolCallError:
    return ToolCallError(ToolFailure(kind=kind, message=message, where=FailureWhere.BODY))
