"""The backend convenience form: a client with ``submit(variant_name, arguments)``.

A backend moves the body's execution elsewhere (DESIGN.md section 6): its variant
sends the **name** of the tool inside it and the validated arguments, never a
closure, to a worker that rebuilt the same Toolset and looks that name up::

    @backend(name="pool", config=PoolConfig)
    def pool(config, context):
        return PoolClient(context.config_path, workers=config.workers)

``pool(config, context)`` is called once per Toolset and config; the client's
``aclose()`` (if any) runs when the Toolset closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, Unpack, runtime_checkable

from pydantic import BaseModel

from toolproof.contract.tools import ToolResult
from toolproof.extensions.forms import ExtensionOptions, checked_options, register_extension
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import Extension
from toolproof.identity import digest_json
from toolproof.tools.tool import Tool

__all__ = ["BackendClient", "backend"]


@runtime_checkable
class BackendClient(Protocol):
    """Executes one call of a named tool elsewhere and returns its result as JSON."""

    async def submit(self, variant_name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the tool ``variant_name`` of the worker's Toolset on ``arguments``."""
        ...


MakeClient: TypeAlias = Callable[[Any, Any], BackendClient]
"""``(config, context) -> BackendClient``; ``context`` is the ``ApplyContext`` (or None)."""


def _client(make: MakeClient, ext_name: str, config: Any, context: Any) -> BackendClient:
    toolset = getattr(context, "toolset", None)
    if toolset is None:
        return make(config, context)
    dumped = config.model_dump(mode="json") if isinstance(config, BaseModel) else None
    key = (ext_name, digest_json(dumped))
    clients: dict[tuple[str, str], BackendClient] = toolset.metadata.setdefault(
        "backend_clients", {}
    )
    client = clients.get(key)
    if client is None:
        client = clients[key] = make(config, context)
        close = getattr(client, "aclose", None)
        if close is not None:
            toolset.on_close(close)
    return client


def backend(*, name: str, **options: Unpack[ExtensionOptions]) -> Callable[[MakeClient], Extension]:
    """Register ``make(config, context) -> BackendClient`` as a backend extension.

    The variant presents the inner tool's schema; its body awaits
    ``client.submit(inner.name, arguments)``. An exception from ``submit`` becomes a
    ``backend`` failure (retryable, ``where="backend"``), never a fabricated success;
    cancellation propagates.

    Args:
        name: the registered name.
        **options: see :class:`~toolproof.extensions.forms.ExtensionOptions`.

    Returns:
        A decorator producing the registered :class:`Extension`.

    Raises:
        TypeError: an option no form takes.

    """
    checked_options("backend", options)

    def decorate(make: MakeClient) -> Extension:
        def factory(inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
            client = _client(make, ext_name, config, context)
            target = inner.name

            async def body(arguments: dict[str, Any]) -> ToolResult:
                try:
                    return await client.submit(target, arguments)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    return ToolResult.fail(
                        "backend",
                        f"backend {ext_name!r} failed to run {target!r}: "
                        f"{type(exc).__name__}: {exc}",
                        where="backend",
                        retryable=True,
                    )

            return Tool(inner.spec.model_copy(update={"name": name}), body)

        ext_name = name
        factory.__module__ = getattr(make, "__module__", factory.__module__)
        factory.__doc__ = make.__doc__
        return register_extension(
            factory, kind=ExtensionKind.BACKEND, name=name, wants_context=True, **options
        )

    return decorate
