"""A toolproof :class:`~toolproof.Tool` as a LangChain ``StructuredTool`` (coroutine only).

``as_structured_tool(tool)`` returns a ``StructuredTool`` whose

* ``coroutine`` calls ``tool.call`` with **exactly** the arguments object LangChain
  received (from ``ainvoke({...})`` or a model's ``ToolCall``): no pydantic
  round trip, no injected defaults, no renamed keys, explicit ``null`` kept. The
  tool's compiled JSON Schema validates it, once, as for a direct call;
* ``func`` is absent: there is no synchronous path (``invoke`` raises
  ``NotImplementedError``, as LangChain does for coroutine-only tools);
* ``args_schema`` is a pydantic model generated from the JSON Schema, for
  LangChain's introspection: a property whose name Python cannot hold
  (:func:`toolproof.declarable_field` is False, or LangChain passes its own
  ``config``/``run_manager``/``callbacks`` keywords under that name) gets an alias,
  so the wire name is unchanged;
* ``tool_call_schema`` (what a model sees) is the declared JSON Schema itself.

A refused call or a failing body raises ``ToolException`` (LangChain's
``handle_tool_error`` applies), chained to the :class:`~toolproof.ToolCallError`.

LangChain is imported when this module is, never by ``import toolproof``; install
the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field, create_model

from toolproof.adapters.frameworks.params import Param, object_schema, params_of
from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.errors import ToolCallError
from toolproof.sessions.port import SessionPort
from toolproof.tools.tool import Tool

__all__ = [
    "LANGCHAIN_RESERVED",
    "ToolproofStructuredTool",
    "args_model",
    "as_structured_tool",
    "session_structured_tools",
]

LANGCHAIN_RESERVED = frozenset(
    {"callbacks", "config", "run_manager", "tool_call_id", "arguments", "model_call_id"}
)
"""Keyword names LangChain (or this bridge) passes to a tool's coroutine itself; a
property of that name is held under an alias in the args model."""


class ToolproofStructuredTool(StructuredTool):
    """A ``StructuredTool`` that hands its toolproof tool the caller's arguments unchanged.

    Build it with :func:`as_structured_tool`.
    """

    declared_schema: dict[str, Any] = Field(default_factory=dict)
    """The tool's declared input JSON Schema (what a model is shown)."""

    @property
    def tool_call_schema(self) -> dict[str, Any]:
        """The declared JSON Schema (LangChain's dict form: the description added on top)."""
        if self.description:
            return {**self.declared_schema, "description": self.description}
        return dict(self.declared_schema)

    @property
    def args(self) -> dict[str, Any]:
        """The declared root properties (``{}`` when the schema declares none)."""
        properties = self.declared_schema.get("properties")
        return dict(properties) if isinstance(properties, dict) else {}

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # Bypass LangChain's pydantic parse: the coroutine gets the raw object, which
        # the tool validates against its JSON Schema exactly as a direct call would.
        if not isinstance(tool_input, dict):
            raise ToolException(
                f"tool {self.name!r} takes a JSON object of arguments, not "
                f"{type(tool_input).__name__}"
            )
        return (), {"arguments": tool_input, "model_call_id": tool_call_id}


def _model_name(tool_name: str) -> str:
    name = re.sub(r"\W", "_", tool_name)
    return f"Args_{name}"


def _fields(params: list[Param], *, typed: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for param in params:
        annotation = param.annotation if typed else Any
        extra: dict[str, Any] = {"description": param.description}
        if param.aliased:
            extra["alias"] = param.wire
        if param.required:
            fields[param.python] = (annotation, Field(**extra))
        else:
            fields[param.python] = (annotation | None if typed else Any, Field(None, **extra))
    return fields


def args_model(tool: Tool | ToolSpec) -> type[BaseModel]:
    """A pydantic model of ``tool``'s root properties, aliased where Python cannot hold a name.

    Field names are Python names, aliases the wire names (``validate_by_alias``,
    ``serialize_by_alias``). A schema whose types cannot become annotations gets
    ``Any`` fields rather than failing: the model is for introspection, the JSON
    Schema decides what is valid.

    Args:
        tool: the tool, or its spec (a frozen replay's recorded tool).

    Returns:
        The model class (named ``Args_<tool name>``).

    """
    spec = tool.spec if isinstance(tool, Tool) else tool
    params = params_of(spec, reserved=LANGCHAIN_RESERVED) or []
    schema = object_schema(spec)
    closed = schema is not None and schema.get("additionalProperties") is False
    config = ConfigDict(
        extra="forbid" if closed else "allow",
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        arbitrary_types_allowed=True,
    )
    name = _model_name(spec.name)
    try:
        model: type[BaseModel] = create_model(
            name, __config__=config, **_fields(params, typed=True)
        )
    except (TypeError, ValueError, NameError):  # an annotation pydantic cannot build
        model = create_model(name, __config__=config, **_fields(params, typed=False))
    model.__doc__ = spec.description or None
    return model


def as_structured_tool(
    tool: Tool, *, call: Callable[..., Awaitable[ToolResult]] | None = None
) -> ToolproofStructuredTool:
    """Present ``tool`` as a coroutine-only LangChain ``StructuredTool``.

    Args:
        tool: a bound toolproof tool (from a function, a contribution, a variant).
        call: what a call runs instead of ``tool.call`` (a recorded session's call of
            the tool), given the same arguments object and, as ``model_call_id``, the
            id of the model's ``ToolCall`` (``None`` when invoked without one).

    Returns:
        The ``StructuredTool``; ``await st.ainvoke(arguments)`` returns the tool's JSON
        value (a string stays a string) and hands the body exactly ``arguments``.

    Raises:
        ToolException: at call time, when the tool refuses the arguments or fails
            (its ``__cause__`` is the :class:`~toolproof.ToolCallError`).

    """

    async def direct(arguments: dict[str, Any], model_call_id: str | None = None) -> ToolResult:
        return await tool.call(arguments)

    return _structured(tool.spec, call or direct)


def _structured(
    spec: ToolSpec, call: Callable[..., Awaitable[ToolResult]]
) -> ToolproofStructuredTool:
    """The ``StructuredTool`` of ``spec`` (built from the spec alone) whose calls run ``call``."""

    async def run(arguments: dict[str, Any], model_call_id: str | None = None) -> Any:
        result = await call(arguments, model_call_id=model_call_id)
        if result.failure is not None:
            raise ToolException(result.failure.message) from ToolCallError(result.failure)
        return result.value

    return ToolproofStructuredTool(
        name=spec.name,
        description=spec.description or spec.name,
        args_schema=args_model(spec),
        coroutine=run,
        declared_schema=spec.input_schema,
    )


def session_structured_tools(session: SessionPort) -> list[ToolproofStructuredTool]:
    """The session's tools as ``StructuredTool`` s whose calls go through it (recorded, or frozen).

    Built from :meth:`SessionPort.tool_specs` alone (a frozen replay's are the tools the
    run stores as presented). Each keeps its tool's exact declared schema and hands the
    caller's arguments unchanged to ``session.call(name, arguments, model_call_id=...)``,
    with the id of the model's ``ToolCall`` when LangChain was given one (a model's tool
    call always is). A failure raises ``ToolException``.
    """
    return [
        _structured(spec, functools.partial(session.call, spec.name))
        for spec in session.tool_specs()
    ]
