"""A session's tools as OpenAI Agents SDK ``FunctionTool`` s (imported only when asked for).

Each tool and variant keeps its exact input schema (``params_json_schema``, not made
strict), and ``on_invoke_tool`` hands the JSON arguments the model sent, parsed and
otherwise unchanged, to the session, so every call is recorded (or served frozen). A
failed call answers the model ``"<kind>: <message>"`` (the SDK sends a returned
string back to the model) instead of ending the run. A value that is not a string
reaches the model as JSON with sorted keys, so a live call and its frozen replay send
the model the same text.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Protocol

from agents import FunctionTool, RunContextWrapper

from toolproof.contract.tools import ToolResult, ToolSpec

__all__ = ["SessionCalls", "session_function_tools"]


class SessionCalls(Protocol):
    """What the tools need of a session (:class:`toolproof.Session` is one)."""

    def tool_specs(self) -> list[ToolSpec]:
        """The specs of every tool and variant."""
        ...

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One recorded (or frozen) call."""
        ...


def _invoker(session: SessionCalls, name: str) -> Any:
    async def invoke(context: RunContextWrapper[Any], arguments: str) -> Any:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            return f"invalid_arguments: the arguments are not JSON ({exc})"
        if not isinstance(parsed, dict):
            return "invalid_arguments: the arguments must be a JSON object"
        result = await session.call(name, parsed)
        if result.failure is not None:
            return f"{result.failure.kind}: {result.failure.message}"
        if isinstance(result.value, str):
            return result.value
        return json.dumps(result.value, sort_keys=True, ensure_ascii=False)

    return invoke


def session_function_tools(session: SessionCalls) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool and variant of ``session``, schemas exactly as bound."""
    return [
        FunctionTool(
            name=spec.name,
            description=spec.description or spec.name,
            params_json_schema=copy.deepcopy(dict(spec.input_schema)),
            on_invoke_tool=_invoker(session, spec.name),
            strict_json_schema=False,
        )
        for spec in session.tool_specs()
    ]
