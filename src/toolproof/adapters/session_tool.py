"""One tool as an agent's session presents it (:attr:`toolproof.Session.toolset`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.sessions.port import SessionPort

__all__ = ["SessionTool"]


@dataclass(frozen=True)
class SessionTool:
    """One tool as a session presents it: its exact spec, and a recorded call.

    Attributes:
        spec: the tool's (or variant's) spec, schemas exactly as bound.

    """

    spec: ToolSpec
    _session: SessionPort

    @property
    def name(self) -> str:
        """The tool name."""
        return self.spec.name

    async def call(
        self, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """Call the tool through the session (recorded, or served frozen).

        ``model_call_id``: the id the agent's model gave the call (``Session.call``).
        """
        return await self._session.call(self.spec.name, arguments, model_call_id=model_call_id)
