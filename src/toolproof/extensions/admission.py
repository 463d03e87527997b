"""Layers decided where a call is admitted: kept in the caller when a backend relocates.

A relocating extension (a backend: ``process``, ``celery``, ...) ships the *name* of
the tool inside it to a worker, which runs that tool and everything inside it. Some
layers must not move with it: ``approve`` asks the session's approver (a callback of
this process), notes its events into this process's trace, and binds the decision to
the call this process admitted. An extension that declares
:attr:`~toolproof.extensions.extension.Extension.runs_at_admission` is such a layer.

:func:`build_relocation` builds a backend over a tool whose layers hold admission
layers so that they run before the call is shipped: the backend ships the tool just
inside the deepest admission layer, and that layer and every layer outside it are
rebuilt, in order and with their own names and configs, around the shipping body.
The variant's name, schema and stack are the ones the combo gives it (its descriptor
does not change); only where each layer executes does. With ``[["approve",
"process"]]``, ``delete_branch_approve_process`` runs the gate of
``delete_branch_approve`` in the caller and ships ``delete_branch``: the worker never
asks for an approval, and the request and decision are in the caller's trace.
"""

from __future__ import annotations

from typing import Any

from toolproof.errors import ExtensionError
from toolproof.extensions.extension import Extension
from toolproof.extensions.registry import ExtensionRegistry
from toolproof.tools.tool import Tool

__all__ = ["admission_layers", "build_relocation"]


def admission_layers(
    inner: Tool, registry: ExtensionRegistry
) -> tuple[list[tuple[Extension, Tool]], Tool] | None:
    """The layers of ``inner`` a relocation must keep in this process, and what it ships.

    Args:
        inner: the tool a relocating extension is applied to.
        registry: where each layer's extension resolves (by its stack layer's name).

    Returns:
        ``None`` when no layer of ``inner`` runs at admission; else the layers from
        ``inner`` down to the deepest admission layer, outermost first, each with its
        extension, and the tool inside that layer (the one to ship).

    Raises:
        ExtensionError: a layer to rebuild names an extension the registry lacks.

    """
    chain = inner.layers()  # outermost first; the last one is the base
    deepest = None
    for index, tool in enumerate(chain[:-1]):
        ext = registry.get(tool.stack[-1].name) if tool.stack else None
        if ext is not None and ext.runs_at_admission:
            deepest = index
    if deepest is None:
        return None
    kept: list[tuple[Extension, Tool]] = []
    for tool in chain[: deepest + 1]:
        layer = tool.stack[-1].name if tool.stack else ""
        ext = registry.get(layer)
        if ext is None:
            raise ExtensionError(
                f"layer {layer!r} of {tool.name!r} is not a registered extension, so it cannot "
                "be kept in the caller's process (rule: a layer outside an admission layer is "
                "rebuilt around a relocation)"
            )
        kept.append((ext, tool))
    return kept, chain[deepest + 1]


def build_relocation(
    ext: Extension,
    inner: Tool,
    *,
    name: str,
    config: Any,
    context: Any,
    registry: ExtensionRegistry,
) -> Tool:
    """Build the relocating extension ``ext`` over ``inner``, admission layers kept here.

    Args:
        ext: the relocating extension (a backend).
        inner: the tool it is applied to.
        name: the variant's name.
        config: ``ext``'s validated config.
        context: the apply context (the factories' ``context=``).
        registry: where the layers of ``inner`` resolve.

    Returns:
        The variant named ``name``: ``ext.build(inner, ...)`` when ``inner`` has no
        admission layer, else the kept layers rebuilt around ``ext`` built over the tool
        inside the deepest of them (see the module docstring).

    Raises:
        ExtensionError: as :func:`admission_layers`; a factory's own errors propagate.

    """
    found = admission_layers(inner, registry)
    if found is None:
        return ext.build(inner, name=name, config=config, context=context)
    kept, shipped = found
    tool = ext.build(shipped, name=name, config=config, context=context)
    for layer_ext, original in reversed(kept):  # innermost kept layer first
        layer_config, _ = layer_ext.parse_config(original.config)
        tool = layer_ext.build(tool, name=original.name, config=layer_config, context=context)
    spec = tool.spec.model_copy(update={"name": name})
    return tool.rebind(spec, base=None, stack=())
