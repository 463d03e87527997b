"""A session's tools as a pydantic-ai ``AbstractToolset`` (imported only when asked for).

Each tool and variant is listed with its exact input schema
(``parameters_json_schema``) and description; pydantic-ai does not validate the
arguments (an accept-any validator), toolproof validates once, and every call goes
through :meth:`toolproof.adapters.agent_session.Session.call`, so it is recorded (or
served frozen). A failed call raises ``ModelRetry`` with ``"<kind>: <message>"`` so
the model sees why and may try again.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR

from toolproof.contract.tools import ToolResult, ToolSpec

__all__ = ["SessionLike", "SessionToolset"]


class SessionLike(Protocol):
    """What the toolset needs of a session (:class:`toolproof.Session` is one)."""

    def tool_specs(self) -> list[ToolSpec]:
        """The specs of every tool and variant."""
        ...

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One recorded (or frozen) call."""
        ...


class SessionToolset(AbstractToolset[Any]):
    """The tools of a session (:mod:`toolproof.adapters.agent_session`) for a pydantic-ai Agent.

    Args:
        session: the session whose calls are recorded.
        max_retries: how often the model may retry a failed call.

    """

    def __init__(self, session: SessionLike, *, max_retries: int = 2) -> None:
        self._session = session
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        """The toolset id pydantic-ai keys durable execution on."""
        return "toolproof-session"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """Every tool and variant, schemas exactly as bound."""
        return {
            spec.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=spec.name,
                    description=spec.description or None,
                    parameters_json_schema=copy.deepcopy(dict(spec.input_schema)),
                ),
                max_retries=self._max_retries,
                args_validator=TOOL_SCHEMA_VALIDATOR,
            )
            for spec in self._session.tool_specs()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Call the tool through the session; a failure becomes ``ModelRetry``.

        Raises:
            ModelRetry: the call failed (its kind and message).
            ReplayRefused: frozen, and the call was not recorded.

        """
        result = await self._session.call(name, tool_args)
        if result.failure is not None:
            raise ModelRetry(f"{result.failure.kind}: {result.failure.message}")
        return result.value
