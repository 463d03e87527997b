"""The extension API as a user types it; `mypy --strict` checks it in CI."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import toolproof
from toolproof import ExtensionKind, Tool, ToolResult
from toolproof.extensions import (
    CallNext,
    ComboElement,
    Extension,
    ExtensionRegistry,
    build_combo,
)

registry = ExtensionRegistry()


@toolproof.wrapper(name="typed_noop", registry=registry)
async def typed_noop(call_next: CallNext, arguments: dict[str, Any], config: Any) -> ToolResult:
    return await call_next(arguments)


class Level(BaseModel):
    level: int = 1


@toolproof.extension(
    kind=ExtensionKind.TRANSFORMER, name="typed_same", config=Level, registry=registry
)
def typed_same(inner: Tool, *, name: str, config: Level) -> Tool:
    return Tool(inner.spec.model_copy(update={"name": name}), inner.run_validated)


async def use(base: Tool) -> bool:
    ext: Extension = typed_noop
    multiple: bool = ext.kind.multiple and ExtensionKind.BACKEND.relocates_execution
    built = build_combo(
        base, [ComboElement("typed_noop"), ComboElement("typed_same")], registry=registry
    )
    variant: Tool = built[-1][1]
    result: ToolResult = await variant.call({})
    return multiple or result.ok
