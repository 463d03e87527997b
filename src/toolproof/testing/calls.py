"""Conformance of one tool: successful and failed calls return typed results."""

from __future__ import annotations

import asyncio
from typing import Any

from toolproof.contract.tools import ToolResult
from toolproof.errors import CanonicalizationError
from toolproof.identity import canonical_json
from toolproof.testing.errors import ConformanceError
from toolproof.tools.tool import Tool

__all__ = ["assert_call_fails", "assert_call_ok"]


def _call(tool: Tool, arguments: Any) -> ToolResult:
    try:
        result = asyncio.run(tool.call(arguments))
    except Exception as exc:
        raise ConformanceError(
            "kit:no-raise",
            f"tool {tool.name!r} raised {type(exc).__name__}: {exc}; a call returns a "
            "ToolResult (a failure is a value), it never raises",
        ) from exc
    if not isinstance(result, ToolResult):
        raise ConformanceError(
            "kit:typed-result", f"tool {tool.name!r} returned {type(result).__name__}"
        )
    return result


def assert_call_ok(tool: Tool, arguments: dict[str, Any]) -> Any:
    """Call ``tool`` (from a synchronous test) and assert it succeeds with a JSON value.

    Returns:
        The value.

    Raises:
        ConformanceError: ``kit:successful-call`` (it failed, or its value has no
            canonical JSON form), ``kit:no-raise`` or ``kit:typed-result``.

    """
    result = _call(tool, arguments)
    if not result.ok or result.failure is not None:
        failure = result.failure
        why = f"{failure.kind}: {failure.message}" if failure else "ok is False"
        raise ConformanceError(
            "kit:successful-call", f"tool {tool.name!r} with {arguments} failed: {why}"
        )
    try:
        canonical_json(result.value)
    except CanonicalizationError as exc:
        raise ConformanceError(
            "kit:successful-call",
            f"tool {tool.name!r} returned a value with no canonical JSON form: {exc.message}",
        ) from None
    return result.value


def assert_call_fails(tool: Tool, arguments: Any, *, kind: str | None = None) -> ToolResult:
    """Call ``tool`` and assert it reports a normalized failure (not an exception, not text).

    Args:
        tool: the tool.
        arguments: arguments that must fail.
        kind: the expected ``failure.kind`` (``invalid_arguments``, ``tool_error``...).

    Returns:
        The failed result.

    Raises:
        ConformanceError: ``kit:failed-call`` when it succeeded, has no kind or message,
            or another kind; ``kit:no-raise`` when it raised.

    """
    result = _call(tool, arguments)
    failure = result.failure
    if result.ok or failure is None:
        raise ConformanceError(
            "kit:failed-call",
            f"tool {tool.name!r} with {arguments!r} returned a value ({result.value!r}) where "
            "it must report a failure; never turn a failure into plausible output",
        )
    if not failure.kind or not failure.message:
        raise ConformanceError(
            "kit:failed-call", f"tool {tool.name!r}: a failure needs a kind and a message"
        )
    if kind is not None and failure.kind != kind:
        raise ConformanceError(
            "kit:failed-call",
            f"tool {tool.name!r}: failure kind {failure.kind!r}, expected {kind!r} "
            f"({failure.message})",
        )
    return result
