"""A session's tools as a pydantic-ai ``AbstractToolset`` (imported only when asked for).

Each tool and variant is listed with its exact input schema
(``parameters_json_schema``) and description; pydantic-ai does not validate the
arguments (an accept-any validator), toolproof validates once, and every call goes
through :meth:`toolproof.adapters.session.Session.call` with the model's
``tool_call_id``, so it is recorded (or served frozen) with the id the model gave it.
A failed call raises ``ModelRetry`` with ``"<kind>: <message>"`` so the model sees why
and may try again.

A call an ``approve`` gate defers (``[approvals] mode = "defer"``: failure kind
``approval_pending``) raises pydantic-ai's ``ApprovalRequired`` with the gate's
handle as metadata (``{"approval_handle": "apr_...", ...}``), so the agent run ends
with ``DeferredToolRequests`` (the agent's ``output_type`` must include it). A
person decides through a toolproof channel (``toolproof approvals``, the HTTP API);
the run is then resumed with ``DeferredToolResults(approvals={id: True},
metadata=requests.metadata)``, and the call is retried with the handle: it runs if
the store holds an approval for exactly those arguments, and answers the denial
otherwise. Approving in ``DeferredToolResults`` decides nothing by itself (it is not
a configured channel): it only resumes.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic_ai import ApprovalRequired, ModelRetry, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR

from toolproof.sessions.port import SessionPort

__all__ = ["HANDLE_KEY", "SessionToolset"]

HANDLE_KEY = "approval_handle"
"""The reserved param a deferred call is retried with (the ``approve`` wrapper's), and the
key of the handle in ``DeferredToolRequests.metadata[tool_call_id]``."""


class SessionToolset(AbstractToolset[Any]):
    """The tools of a session (:mod:`toolproof.adapters.session`) for a pydantic-ai Agent.

    Args:
        session: the session whose calls are recorded.
        max_retries: how often the model may retry a failed call.

    """

    def __init__(self, session: SessionPort, *, max_retries: int = 2) -> None:
        self._session = session
        self._max_retries = max_retries
        self._handles: dict[str, str] = {}

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

        A resumed, approved deferred call (``ctx.tool_call_approved``) is retried with
        its handle: from ``ctx.tool_call_metadata`` (what ``DeferredToolResults.metadata``
        gave back), else the one this toolset saw deferred under the same tool call id.

        Raises:
            ApprovalRequired: the gate deferred the call (``approval_pending``); the
                metadata holds ``approval_handle``, ``tool`` and the failure message.
            ModelRetry: the call failed (its kind and message).
            ReplayRefused: frozen, and the call was not recorded.

        """
        call_id = ctx.tool_call_id or ""
        arguments = tool_args
        if ctx.tool_call_approved:
            handle = _handle_in(ctx.tool_call_metadata) or self._handles.get(call_id)
            if handle is not None:
                arguments = {**tool_args, HANDLE_KEY: handle}
        result = await self._session.call(name, arguments, model_call_id=ctx.tool_call_id)
        failure = result.failure
        if failure is not None and failure.kind == "approval_pending":
            pending = failure.detail.get("handle")
            if isinstance(pending, str):
                self._handles[call_id] = pending
                raise ApprovalRequired(
                    metadata={HANDLE_KEY: pending, "tool": name, "message": failure.message}
                )
        if failure is not None:
            raise ModelRetry(f"{failure.kind}: {failure.message}")
        return result.value


def _handle_in(metadata: Any) -> str | None:
    handle = metadata.get(HANDLE_KEY) if isinstance(metadata, dict) else None
    return handle if isinstance(handle, str) else None
