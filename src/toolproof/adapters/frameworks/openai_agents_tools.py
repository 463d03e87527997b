"""A session's tools as OpenAI Agents SDK ``FunctionTool`` s (imported only when asked for).

Each tool and variant keeps its exact input schema (``params_json_schema``, not made
strict), and ``on_invoke_tool`` hands the JSON arguments the model sent, parsed and
otherwise unchanged, to the session with the SDK's ``call_id`` (the id the model gave
the call), so every call is recorded (or served frozen) with it. A
failed call answers the model ``"<kind>: <message>"`` (the SDK sends a returned
string back to the model) instead of ending the run. A value that is not a string
reaches the model as JSON with sorted keys, so a live call and its frozen replay send
the model the same text.

A gated variant (its layer chain holds ``approve``) is given a ``needs_approval``
check that makes the call: when the gate defers it (``[approvals] mode = "defer"``,
failure kind ``approval_pending``) the run stops with the SDK's approval interruption
(``result.interruptions``), and the handle is kept under the SDK's call id. A person
decides through a toolproof channel (``toolproof approvals``, the HTTP API); the
application then approves the interruption (``state = result.to_state();
state.approve(item)``) and resumes (``Runner.run(agent, state)``) in the same session:
the call is retried with the handle and runs only if the store holds an approval for
exactly those arguments (else the model is told the denial). ``state.approve`` by
itself decides nothing: it resumes. A call the gate does not defer (no rule matched,
or an approver callback decided) is answered from that first attempt; nothing runs
twice.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext

from toolproof.contract.tools import ToolResult
from toolproof.sessions.port import SessionPort

__all__ = ["HANDLE_KEY", "session_function_tools"]

HANDLE_KEY = "approval_handle"
"""The reserved param of the ``approve`` wrapper a deferred call is retried with."""


def _answer(result: ToolResult) -> Any:
    if result.failure is not None:
        return f"{result.failure.kind}: {result.failure.message}"
    if isinstance(result.value, str):
        return result.value
    return json.dumps(result.value, sort_keys=True, ensure_ascii=False)


class _Gated:
    """The deferred calls of one gated tool, by the SDK's call id."""

    def __init__(self, session: SessionPort, name: str) -> None:
        self.session = session
        self.name = name
        self.handles: dict[str, str] = {}
        self.answered: dict[str, ToolResult] = {}

    async def needs_approval(
        self, context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
    ) -> bool:
        """Make the call; interrupt the run when the gate defers it."""
        result = await self.session.call(self.name, arguments, model_call_id=call_id)
        failure = result.failure
        handle = failure.detail.get("handle") if failure is not None else None
        if failure is not None and failure.kind == "approval_pending" and isinstance(handle, str):
            self.handles[call_id] = handle
            return True
        self.answered[call_id] = result
        return False

    async def invoke(self, call_id: str, parsed: dict[str, Any]) -> ToolResult:
        """The first attempt's result, or the approved retry with the handle."""
        if call_id in self.answered:
            return self.answered.pop(call_id)
        handle = self.handles.pop(call_id, None)
        arguments = parsed if handle is None else {**parsed, HANDLE_KEY: handle}
        return await self.session.call(self.name, arguments, model_call_id=call_id)


def _invoker(session: SessionPort, name: str, gated: _Gated | None) -> Any:
    # ToolContext (not RunContextWrapper) in the annotation: the SDK passes the call id
    async def invoke(context: ToolContext[Any], arguments: str) -> Any:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            return f"invalid_arguments: the arguments are not JSON ({exc})"
        if not isinstance(parsed, dict):
            return "invalid_arguments: the arguments must be a JSON object"
        if gated is not None:
            return _answer(await gated.invoke(context.tool_call_id, parsed))
        return _answer(await session.call(name, parsed, model_call_id=context.tool_call_id))

    return invoke


def session_function_tools(session: SessionPort) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool and variant of ``session``, schemas exactly as bound.

    Gated variants get the ``needs_approval`` check of the module docstring.
    """
    tools = []
    for spec in session.tool_specs():
        gated = _Gated(session, spec.name) if session.is_gated(spec.name) else None
        tools.append(
            FunctionTool(
                name=spec.name,
                description=spec.description or spec.name,
                params_json_schema=copy.deepcopy(dict(spec.input_schema)),
                on_invoke_tool=_invoker(session, spec.name, gated),
                strict_json_schema=False,
                needs_approval=gated.needs_approval if gated is not None else False,
            )
        )
    return tools
