"""The binding conformance suite through the LangChain adapter.

``bind`` binds the declaration with :func:`toolproof.bind_contribution` and presents
it with :func:`toolproof.adapters.frameworks.langchain.as_structured_tool`; a call is
``await structured.ainvoke(arguments)``, so every probe checks that LangChain's
path hands the body exactly what a direct call would (refusals raise
``ToolException``). Run by ``tests/conformance/harness.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from binding_adapter import declared_tool  # the harness puts this folder on sys.path

from toolproof.adapters.frameworks.langchain import as_structured_tool


def bind(
    declaration: dict[str, Any], invoke: Callable[[dict[str, Any]], Awaitable[Any]]
) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """Bind one declaration; return ``async fn(arguments) -> invoke's result``."""
    structured = as_structured_tool(declared_tool(declaration, invoke))

    async def call(arguments: dict[str, Any]) -> Any:
        return await structured.ainvoke(arguments)

    return call
