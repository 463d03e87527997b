"""The apply site: a combo ``[a, b]`` on tool ``t`` binds ``t_a`` and ``t_a_b``.

Every extension mints a new, named variant next to the tool it extends; nothing is
replaced in place. The apply site resolves each extension, validates its config,
calls its factory and checks the returned variant against the properties of the
extension's kind. Each refusal is an :class:`ExtensionError` whose message names
the tool, the combo and the rule::

    cannot apply combo [retry, nope] to tool 'add': unknown extension 'nope' (registered: ...)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolproof.contract.names import TOOL_NAME_PATTERN, TOOL_NAME_RE
from toolproof.contract.tools import StackLayer
from toolproof.errors import ExtensionError
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import Extension, ExtensionRegistry
from toolproof.extensions.schema import first_difference, is_concrete, strip_reserved
from toolproof.tools.exposure import GATE_EXTENSION
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = ["ApplyContext", "ComboElement", "apply_combos", "build_combo", "combo_text"]


@dataclass(frozen=True)
class ComboElement:
    """One element of a combo: an extension name and its config table (``None``: none given)."""

    name: str
    config: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ApplyContext:
    """What factories registered with ``wants_context=True`` receive as ``context=``.

    Attributes:
        toolset: the Toolset being built (``on_close`` for pools, files, connections).
        config_path: the ``toolproof.toml`` the Toolset is built from (workers rebuild
            the same Toolset from it), or ``None`` when applied from code.
        base_dir: the directory relative paths in extension configs are relative to.
        backends: the ``[backends.NAME]`` tables of the config file.
        approver: the approver callback of ``load_toolset(..., approver=)`` for the
            ``approve`` layers (``async (ApprovalRequest) -> bool | Decision``), or ``None``.

    """

    toolset: Toolset | None = None
    config_path: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    backends: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    approver: Any = None


def combo_text(combo: Sequence[ComboElement]) -> str:
    """``[retry, cache]``: how errors name a combo."""
    return "[" + ", ".join(element.name for element in combo) + "]"


def _resolve(
    combo: Sequence[ComboElement], registry: ExtensionRegistry, base: Tool
) -> list[tuple[Extension, Any, str]]:
    resolved: list[tuple[Extension, Any, str]] = []
    for element in combo:
        ext = registry.get(element.name)
        if ext is None:
            raise ExtensionError(
                f"unknown extension {element.name!r} (registered: {', '.join(registry.names())})"
            )
        config, config_digest = ext.parse_config(element.config)
        resolved.append((ext, config, config_digest))
    kinds = [(layer.name, ExtensionKind(layer.kind)) for layer in base.stack]
    kinds += [(ext.name, ext.kind) for ext, _, _ in resolved]
    for kind in ExtensionKind:
        if kind.multiple:
            continue
        names = [name for name, other in kinds if other == kind]
        if len(names) > 1:
            quoted = " and ".join(repr(name) for name in names)
            raise ExtensionError(
                f"two {kind} extensions ({quoted}) in one combo "
                f"(rule: {kind} is not multiple: at most one per combo)"
            )
    for index, (ext, _, _) in enumerate(resolved):
        if not ext.requires_body_locality:
            continue
        outer = len(base.stack) + index
        relocating = [name for name, kind in kinds[:outer] if kind.relocates_execution]
        if relocating:
            raise ExtensionError(
                f"extension {ext.name!r} requires body locality but is placed after (outside) "
                f"relocating extension {relocating[0]!r} (rule: put it before {relocating[0]!r} "
                "in the combo so it runs where the body runs)"
            )
    return resolved


def _check_variant(ext: Extension, inner: Tool, variant: Any, name: str) -> None:
    if not isinstance(variant, Tool):
        raise ExtensionError(
            f"extension {ext.name!r} returned {type(variant).__name__}, not a Tool"
        )
    if variant.name != name:
        raise ExtensionError(
            f"extension {ext.name!r} returned a tool named {variant.name!r}, not {name!r} "
            "(rule: a variant is named <tool>_<extension>)"
        )
    kind = ext.kind
    schema = variant.spec.input_schema
    if kind.preserves_schema:
        properties = schema.get("properties") or {}
        for param in ext.reserved_params:
            if param not in properties:
                raise ExtensionError(
                    f"{kind} {ext.name!r} does not show its reserved param {param!r} in the "
                    "variant's input schema (rule: reserved params are declared in the schema)"
                )
        where = first_difference(
            inner.spec.input_schema, strip_reserved(schema, ext.reserved_params)
        )
        if where is not None:
            raise ExtensionError(
                f"{kind} {ext.name!r} presents an input schema that differs from its input at "
                f"{where} (rule: a {kind} presents its input's schema unchanged, minus its "
                "reserved params)"
            )
    if kind.declares_schema and not is_concrete(schema):
        raise ExtensionError(
            f"{kind} {ext.name!r} presents no concrete input schema (rule: a {kind} declares "
            "its own parameters, never bare *args/**kwargs)"
        )


def _layer(
    ext: Extension, config: Any, config_digest: str, inner: Tool, name: str, context: Any
) -> Tool:
    properties = inner.spec.input_schema.get("properties") or {}
    for param in ext.reserved_params:
        if param in properties:
            raise ExtensionError(
                f"reserved param {param!r} of {ext.kind} {ext.name!r} is already a parameter of "
                f"{inner.name!r} (rule: a reserved param must not shadow an input parameter)"
            )
    try:
        variant = ext.build(inner, name=name, config=config, context=context)
    except ExtensionError as exc:
        raise ExtensionError(exc.rule) from exc
    except Exception as exc:
        raise ExtensionError(
            f"extension {ext.name!r} failed to build {name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    _check_variant(ext, inner, variant, name)
    spec = variant.spec
    update: dict[str, Any] = {}
    if not spec.description.strip():
        update["description"] = inner.spec.description
    if spec.output_schema is None and ext.kind.preserves_output_shape:
        update["output_schema"] = inner.spec.output_schema
    if update:
        spec = spec.model_copy(update=update)
    layer = StackLayer(
        name=ext.name, kind=str(ext.kind), version=ext.version, config_digest=config_digest
    )
    try:
        return variant.rebind(
            spec,
            base=inner.base or inner.name,
            stack=(*inner.stack, layer),
            inner=inner,
            config=config.model_dump(mode="json") if isinstance(config, BaseModel) else {},
        )
    except Exception as exc:
        raise ExtensionError(f"variant {name!r} does not bind: {exc}") from exc


Key = tuple[tuple[str, str], ...]


def build_combo(
    base: Tool,
    combo: Sequence[ComboElement],
    *,
    registry: ExtensionRegistry | None = None,
    is_taken: Callable[[str], bool] = lambda name: False,
    minted: Mapping[str, tuple[Key, Tool]] | None = None,
    context: Any = None,
) -> list[tuple[Key, Tool]]:
    """Build the variants of one combo over ``base``, innermost first.

    Args:
        base: the tool the combo extends.
        combo: the elements, innermost first (``[a, b]``: ``b`` wraps ``a`` wraps ``base``).
        registry: where names resolve (default: a new registry of the built-ins).
        is_taken: whether a name is already bound (a variant may never take it).
        minted: variants already built from other combos on ``base``: name -> (key,
            tool); a shared prefix is reused, not rebuilt.
        context: passed to factories registered with ``wants_context=True``.

    Returns:
        The new ``(key, variant)`` pairs; prefixes found in ``minted`` are not repeated.

    Raises:
        ExtensionError: a refusal naming the tool, the combo and the rule; nothing is bound.

    """
    registry = registry or ExtensionRegistry()
    minted = minted or {}
    try:
        if not combo:
            raise ExtensionError("a combo needs at least one extension")
        resolved = _resolve(combo, registry, base)
        built: list[tuple[Key, Tool]] = []
        inner: Tool = base
        key: Key = ()
        for ext, config, config_digest in resolved:
            name = f"{inner.name}_{ext.name}"
            key = (*key, (ext.name, config_digest))
            if name in minted:
                known_key, known = minted[name]
                if known_key != key:
                    raise ExtensionError(
                        f"variant name {name!r} is minted twice with different configs "
                        "(rule: one name, one variant)"
                    )
                inner = known
                continue
            if TOOL_NAME_RE.match(name) is None:
                raise ExtensionError(f"variant name {name!r} must match {TOOL_NAME_PATTERN}")
            if is_taken(name) or any(tool.name == name for _, tool in built):
                raise ExtensionError(
                    f"variant name {name!r} is already taken (rule: an extension mints a new "
                    "name and never replaces a tool)"
                )
            inner = _layer(ext, config, config_digest, inner, name, context)
            built.append((key, inner))
        return built
    except ExtensionError as exc:
        names = [element.name for element in combo]
        raise ExtensionError(
            exc.rule,
            message=f"cannot apply combo {combo_text(combo)} to tool {base.name!r}: {exc.rule}",
            tool=base.name,
            combo=names,
        ) from exc


def apply_combos(
    toolset: Toolset,
    tool: str,
    combos: Sequence[Sequence[ComboElement]],
    *,
    registry: ExtensionRegistry | None = None,
    context: Any = None,
    field_prefix: str = "",
) -> list[Tool]:
    """Apply each combo to the tool ``tool`` of ``toolset``; quarantine each refused combo.

    A refused combo binds nothing (its shared prefixes from other combos stay), and
    every other combo and tool still binds.

    Args:
        toolset: the unsealed Toolset holding ``tool``.
        tool: the base tool's name.
        combos: the normalized combos.
        registry: where names resolve (default: a new registry of the built-ins).
        context: for factories registered with ``wants_context=True``.
        field_prefix: the config key of the combos (``tools.add.extensions``), for quarantine.

    Returns:
        The variants added, in binding order.

    Raises:
        KeyError: ``tool`` is not in ``toolset``.

    """
    base = toolset[tool]
    minted: dict[str, tuple[Key, Tool]] = {}
    added: list[Tool] = []
    for index, combo in enumerate(combos):
        try:
            built = build_combo(
                base,
                combo,
                registry=registry,
                is_taken=toolset.__contains__,
                minted=minted,
                context=context,
            )
        except ExtensionError as exc:
            name = "_".join([tool, *(element.name for element in combo)])
            where = f"{field_prefix}[{index}]" if field_prefix else f"combo[{index}]"
            toolset.quarantine(name, where, exc.message, owner="extensions")
            if any(element.name == GATE_EXTENSION for element in combo):
                toolset.refuse_gate(tool, name)  # its siblings stay hidden: fail closed
            continue
        for key, variant in built:
            toolset.add(variant, owner=f"extensions:{combo_text(combo)}")
            minted[variant.name] = (key, variant)
            added.append(variant)
    return added
