"""The backend form: the variant sends the inner name and arguments to a ``Backend``."""

from __future__ import annotations

import asyncio
from typing import Any

from ext_support import elements, make_tool, toolset_with
from pydantic import BaseModel

from toolproof import ExtensionKind, ToolResult, Toolset
from toolproof.backends import BackendRequest, LocalBackend, backend
from toolproof.extensions import (
    ApplyContext,
    ExtensionRegistry,
    apply_combos,
    register_extension,
)


class FailingBackend(LocalBackend):
    """A local backend whose engine is down: every submit raises (a fault a test cannot cause)."""

    async def submit(self, request: BackendRequest) -> ToolResult:
        self.sent.append(request)
        raise ConnectionError("broker down")


class LoopConfig(BaseModel):
    fail: bool = False


def setup() -> tuple[ExtensionRegistry, list[LocalBackend], Toolset]:
    registry = ExtensionRegistry()
    clients: list[LocalBackend] = []

    @backend(name="loop", config=LoopConfig, version="3", registry=registry)
    def loop(config: LoopConfig, context: ApplyContext) -> LocalBackend:
        assert context.toolset is not None
        clients.append((FailingBackend if config.fail else LocalBackend)(context.toolset))
        return clients[-1]

    register_extension(
        lambda inner, *, name, config: make_tool(name, body=inner.run_validated),
        kind="wrapper",
        name="proxy",
        requires_body_locality=True,
        registry=registry,
    )
    toolset = toolset_with(make_tool(output_schema={"type": "integer"}))
    return registry, clients, toolset


def test_backend_variant_sends_the_inner_name() -> None:
    registry, clients, toolset = setup()
    context = ApplyContext(toolset=toolset)
    added = apply_combos(
        toolset,
        "add",
        [elements("loop"), elements("proxy", "loop")],
        registry=registry,
        context=context,
    )
    assert [tool.name for tool in added] == ["add_loop", "add_proxy", "add_proxy_loop"]
    assert len(clients) == 1  # one client per Toolset and config
    variant = toolset["add_proxy_loop"]
    layer = variant.descriptor().stack[-1]
    assert (layer.name, layer.kind, layer.version) == ("loop", ExtensionKind.BACKEND, "3")
    assert variant.spec.output_schema == {"type": "integer"}

    async def go() -> list[Any]:
        async with toolset.seal():
            return [
                (await toolset["add_loop"].call({"a": 1})).value,
                (await toolset["add_proxy_loop"].call({"a": 2, "b": 5})).value,
            ]

    assert asyncio.run(go()) == [2, 7]
    sent = [(request.variant, request.arguments) for request in clients[0].sent]
    assert sent == [("add", {"a": 1}), ("add_proxy", {"a": 2, "b": 5})]
    assert clients[0].closed


def test_backend_failure_is_normalized() -> None:
    registry, _, toolset = setup()
    apply_combos(
        toolset,
        "add",
        [elements(("loop", {"fail": True}))],
        registry=registry,
        context=ApplyContext(toolset=toolset),
    )
    result = asyncio.run(toolset["add_loop"].call({"a": 1}))
    assert result.failure is not None
    # mapped through the engine table: a ConnectionError is "unavailable" in every backend
    assert (result.failure.kind, result.failure.where, result.failure.retryable) == (
        "unavailable",
        "backend",
        True,
    )
    assert result.failure.message == (
        "backend 'loop' failed to run 'add': ConnectionError: broker down"
    )
    assert result.failure.detail == {"exception": "builtins.ConnectionError"}


def test_locality_wrapper_outside_the_backend_is_quarantined() -> None:
    registry, _, toolset = setup()
    apply_combos(
        toolset,
        "add",
        [elements("loop", "proxy")],
        registry=registry,
        context=ApplyContext(toolset=toolset),
    )
    assert toolset.names() == ["add", "add_loop"]  # the valid prefix binds
    assert toolset.quarantined[0].field == "combo[0][1]"
    assert toolset.quarantined[0].rule.endswith(
        "extension 'proxy' requires body locality but is placed after (outside) relocating "
        "extension 'loop' (rule: put it before 'loop' in the combo so it runs where the body "
        "runs) (its valid prefix binds: add_loop)"
    )
