"""The ``invalid_arguments`` / ``invalid_result`` failures a tool's validation step gives."""

from __future__ import annotations

from collections.abc import Sequence

from toolproof.contract.tools import ToolResult
from toolproof.schema.isolation import ValidationLimitError
from toolproof.schema.validation import ArgumentError

__all__ = ["not_plain", "over_limit", "refusal", "result_breaks", "result_not_plain"]


def refusal(tool: str, found: Sequence[tuple[str, str]]) -> ToolResult | None:
    """``invalid_arguments`` naming each ``(pointer, message)`` of ``found``; ``None`` if empty.

    The message joins the errors (``invalid arguments for tool 't': argument 'a': ...``);
    ``detail.errors`` lists them as ``{"pointer", "message"}``.
    """
    if not found:
        return None
    errors = [ArgumentError(pointer, message) for pointer, message in found]
    text = "; ".join(error.describe() for error in errors)
    return ToolResult.fail(
        "invalid_arguments",
        f"invalid arguments for tool {tool!r}: {text}",
        where="arguments",
        detail={"errors": [error.to_json() for error in errors]},
    )


def not_plain(tool: str, problem: str) -> ToolResult:
    """``invalid_arguments`` for arguments that are not plain JSON (``problem`` says where)."""
    text = f"{problem} (arguments must be plain JSON)"
    return ToolResult.fail(
        "invalid_arguments",
        f"invalid arguments for tool {tool!r}: {text}",
        where="arguments",
        detail={"errors": [{"pointer": "", "message": text}]},
    )


def over_limit(tool: str, exc: Exception, where: str) -> ToolResult:
    """The failure of a validation in a worker that passed a bound or raised.

    Args:
        tool: the tool's name.
        exc: a :class:`ValidationLimitError` (``validation exceeded 5 s``) or the
            validator's ``ValueError``.
        where: ``"arguments"`` (``invalid_arguments``) or ``"output"`` (``invalid_result``).

    Returns:
        ``invalid arguments for tool 't': validation exceeded 5 s (rule: validating one
        call is bounded to 5 s and 1 GiB, ValidationBounds; ...)``.

    """
    if isinstance(exc, ValidationLimitError):
        bounds = exc.bounds
        text = (
            f"{exc.text} (rule: validating one call of a schema that needs isolation is "
            f"bounded to {bounds.describe_seconds()} and {bounds.describe_memory()} in a "
            "worker process, ValidationBounds; the worker was stopped)"
        )
        message = exc.text
    else:
        text = message = f"{type(exc).__name__}: {exc}"
    if where == "arguments":
        return ToolResult.fail(
            "invalid_arguments",
            f"invalid arguments for tool {tool!r}: {text}",
            where="arguments",
            detail={"errors": [{"pointer": "", "message": message}]},
        )
    return ToolResult.fail(
        "invalid_result",
        f"tool {tool!r} returned a value that could not be checked against its output "
        f"schema: {text}",
        where="output",
    )


def result_not_plain(tool: str, problem: str) -> ToolResult:
    """``invalid_result`` for a value that is not plain JSON (``problem`` says where)."""
    return ToolResult.fail(
        "invalid_result",
        f"tool {tool!r} returned a value that is not plain JSON: {problem}",
        where="output",
    )


def result_breaks(tool: str, found: Sequence[tuple[str, str]]) -> ToolResult:
    """``invalid_result`` naming each ``(pointer, message)`` the output schema reported."""
    text = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in found)
    return ToolResult.fail(
        "invalid_result",
        f"tool {tool!r} returned a value that breaks its output schema: {text}",
        where="output",
    )
