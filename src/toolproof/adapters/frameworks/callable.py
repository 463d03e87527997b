"""A toolproof :class:`~toolproof.Tool` as a plain Python async callable.

``as_callable(tool)`` returns an ``async`` function built with makefun, in one of
two forms, decided by the tool's root properties:

* **named** — every property name passes :func:`toolproof.declarable_field` and the
  root is an object schema with ``properties``: the function takes one
  *keyword-only* parameter per property, in declaration order, annotated from
  the JSON Schema; required properties have no default, optional ones default to
  :data:`OMITTED`, which means "not sent" (``None`` means an explicit JSON
  ``null``). ``inspect.signature`` shows exactly that. Keys outside the declared
  properties cannot be passed in this form.
* **dict** — otherwise (a keyword, ``_x``, ``model_config``, ``a.b``..., or no
  ``properties``): the function takes one positional parameter,
  ``arguments: dict[str, Any]``, the JSON object as it goes on the wire.

Either way the call validates with the tool's compiled JSON Schema and the body
receives exactly the properties given (omitted stays omitted); the function
returns the tool's JSON value and raises :class:`~toolproof.ToolCallError` when the
call is refused or fails. The tool is at ``fn.__toolproof_tool__``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

from makefun import create_function

from toolproof.adapters.frameworks.params import params_of
from toolproof.tools.declared import declarable_field
from toolproof.tools.tool import Tool

__all__ = ["OMITTED", "as_callable"]


class _Omitted:
    """The type of :data:`OMITTED`."""

    _instance: _Omitted | None = None

    def __new__(cls) -> _Omitted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "OMITTED"

    def __bool__(self) -> bool:
        return False


OMITTED: Final = _Omitted()
"""Default of an optional parameter of a named callable: the property is not sent."""


def _function_name(tool_name: str) -> str:
    name = re.sub(r"\W", "_", tool_name)
    return name if name.isidentifier() and not name[0].isdigit() else f"tool_{name}"


def as_callable(tool: Tool) -> Callable[..., Awaitable[Any]]:
    """Present ``tool`` as an async Python function with a real signature where possible.

    Args:
        tool: a bound toolproof tool.

    Returns:
        ``async fn(*, <property>=..., ...)`` (named form) or
        ``async fn(arguments: dict[str, Any])`` (dict form); see the module docstring
        for which one a tool gets.

    Raises:
        ToolCallError: at call time, when the tool refuses the arguments or fails.

    """
    params = params_of(tool)
    name = _function_name(tool.name)
    doc: dict[str, Any] = {"doc": tool.spec.description} if tool.spec.description else {}
    if params is not None and all(declarable_field(param.wire) for param in params):
        signature = inspect.Signature(
            [
                inspect.Parameter(
                    param.wire,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=inspect.Parameter.empty if param.required else OMITTED,
                    annotation=param.annotation,
                )
                for param in params
            ],
            return_annotation=Any,
        )

        async def named(**kwargs: Any) -> Any:
            arguments = {key: value for key, value in kwargs.items() if value is not OMITTED}
            return (await tool.call(arguments)).unwrap()

        fn = create_function(signature, _impl(named), func_name=name, qualname=name, **doc)
    else:
        signature = inspect.Signature(
            [
                inspect.Parameter(
                    "arguments",
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    annotation=dict[str, Any],
                )
            ],
            return_annotation=Any,
        )

        async def whole(arguments: dict[str, Any]) -> Any:
            return (await tool.call(arguments)).unwrap()

        fn = create_function(signature, _impl(whole), func_name=name, qualname=name, **doc)
    fn.__toolproof_tool__ = tool
    result: Callable[..., Awaitable[Any]] = fn
    return result


def _impl(function: Callable[..., Awaitable[Any]]) -> Any:
    """``function`` typed as makefun's ``func_impl`` accepts it (any callable)."""
    return function
