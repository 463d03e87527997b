"""``call_next``: how a wrapper layer runs the layer inside it.

Used by the ``@wrapper`` form and by built-in wrappers (``timeout``), below both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from toolproof.contract.tools import ToolResult
from toolproof.extensions.schema import is_flat_object_schema
from toolproof.tools.tool import Tool

__all__ = ["CallNext", "call_next_for"]

CallNext: TypeAlias = Callable[[dict[str, Any]], Awaitable[ToolResult]]
"""``await call_next(arguments) -> ToolResult``: run the next layer inward."""


def call_next_for(inner: Tool, reserved: Sequence[str] | Mapping[str, Any] = ()) -> CallNext:
    """The ``call_next`` a wrapper layer uses: run ``inner`` on already-validated arguments.

    Without reserved params this is ``inner.run_validated`` itself (the outermost
    variant validated against the identical schema). With reserved params they are
    stripped first; the inner layer skips re-validation only when its schema is flat
    (:func:`~toolproof.extensions.schema.is_flat_object_schema`), else it validates.
    """
    drop = frozenset(reserved)
    if not drop:
        return inner.run_validated
    run = inner.run_validated if is_flat_object_schema(inner.spec.input_schema) else inner.call

    def call_next(arguments: dict[str, Any]) -> Awaitable[ToolResult]:
        return run({k: v for k, v in arguments.items() if k not in drop})

    return call_next
