"""Helpers for the extension tests: small real tools and a toolset to apply combos on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from toolproof import Tool, ToolAnnotations, ToolResult, Toolset, ToolSpec
from toolproof.extensions import ComboElement, ExtensionRegistry, apply_combos, build_combo

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "description": "first"},
        "b": {"type": "integer", "default": 1},
    },
    "required": ["a"],
    "additionalProperties": False,
}


def make_tool(
    name: str = "add",
    *,
    body: Callable[[dict[str, Any]], Awaitable[Any]] | None = None,
    schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    read_only: bool | None = True,
    idempotent: bool | None = None,
    description: str = "Add two integers.",
) -> Tool:
    """A declared tool; by default ``a + b`` and marked read-only."""

    async def add(arguments: dict[str, Any]) -> Any:
        return arguments["a"] + arguments.get("b", 1)

    spec = ToolSpec(
        name=name,
        description=description,
        input_schema=schema or SCHEMA,
        output_schema=output_schema,
        annotations=ToolAnnotations(readOnlyHint=read_only, idempotentHint=idempotent),
    )
    return Tool(spec, body or add, source=f"test:{name}")


class Recorder:
    """A tool body that records each call's arguments and answers from a script."""

    def __init__(self, *outcomes: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.outcomes = list(outcomes)

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        self.calls.append(dict(arguments))
        outcome = self.outcomes.pop(0) if self.outcomes else arguments.get("a")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def elements(*items: str | tuple[str, dict[str, Any]]) -> tuple[ComboElement, ...]:
    """``elements("retry", ("timeout", {"seconds": 1}))`` -> a combo."""
    return tuple(
        ComboElement(item) if isinstance(item, str) else ComboElement(item[0], item[1])
        for item in items
    )


def toolset_with(*tools: Tool) -> Toolset:
    toolset = Toolset()
    for tool in tools:
        toolset.add(tool, owner="test")
    return toolset


def apply(
    toolset: Toolset,
    tool: str,
    *combos: Sequence[ComboElement],
    registry: ExtensionRegistry | None = None,
) -> list[str]:
    """Apply combos and return the names of the added variants."""
    return [
        v.name
        for v in apply_combos(toolset, tool, list(combos), registry=registry or ExtensionRegistry())
    ]


def refusal(base: Tool, *items: str | tuple[str, dict[str, Any]], **kw: Any) -> str:
    """The message of the ExtensionError that building this combo raises."""
    from toolproof import ExtensionError

    registry = kw.pop("registry", None) or ExtensionRegistry()
    try:
        build_combo(base, elements(*items), registry=registry, **kw)
    except ExtensionError as exc:
        return exc.message
    raise AssertionError("the combo was not refused")


def run(coro: Awaitable[ToolResult]) -> ToolResult:
    async def wrap() -> ToolResult:
        return await coro

    return asyncio.run(wrap())
