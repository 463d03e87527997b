"""The apply site: a combo ``[a, b]`` on tool ``t`` binds ``t_a`` and ``t_a_b``.

Every extension mints a new, named variant next to the tool it extends; nothing is
replaced in place. The apply site resolves each extension, validates its config,
calls its factory and checks the returned variant against the properties of the
extension's kind. Each refusal is an :class:`ExtensionError` whose message names
the tool, the combo and the rule::

    cannot apply combo [retry, nope] to tool 'add': unknown extension 'nope' (registered: ...)

The layers are checked and built in order; from ``toolproof.toml``
(:func:`apply_combos`) a combo binds its valid prefix (``add_retry`` above) and is
quarantined from its first invalid layer.
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
from toolproof.extensions.admission import build_relocation
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
    element: ComboElement,
    registry: ExtensionRegistry,
    earlier: Sequence[tuple[str, ExtensionKind]],
) -> tuple[Extension, Any, str]:
    """Resolve one layer: its extension, validated config and config digest.

    Args:
        element: the layer.
        registry: where its name resolves.
        earlier: ``(name, kind)`` of every layer inside it (the base's stack, then the
            combo's layers before it), innermost first.

    Raises:
        ExtensionError: unknown extension, invalid config, a second extension of a kind
            that is not ``multiple``, or a body-local extension outside a relocating one.

    """
    ext = registry.get(element.name)
    if ext is None:
        raise ExtensionError(
            f"unknown extension {element.name!r} (registered: {', '.join(registry.names())})"
        )
    config, config_digest = ext.parse_config(element.config)
    if not ext.kind.multiple:
        names = [name for name, kind in earlier if kind == ext.kind]
        if names:
            quoted = " and ".join(repr(name) for name in (*names, ext.name))
            raise ExtensionError(
                f"two {ext.kind} extensions ({quoted}) in one combo "
                f"(rule: {ext.kind} is not multiple: at most one per combo)"
            )
    if ext.requires_body_locality:
        relocating = [name for name, kind in earlier if kind.relocates_execution]
        if relocating:
            raise ExtensionError(
                f"extension {ext.name!r} requires body locality but is placed after (outside) "
                f"relocating extension {relocating[0]!r} (rule: put it before {relocating[0]!r} "
                "in the combo so it runs where the body runs)"
            )
    return ext, config, config_digest


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
    ext: Extension,
    config: Any,
    config_digest: str,
    inner: Tool,
    name: str,
    context: Any,
    registry: ExtensionRegistry,
) -> Tool:
    properties = inner.spec.input_schema.get("properties") or {}
    for param in ext.reserved_params:
        if param in properties:
            raise ExtensionError(
                f"reserved param {param!r} of {ext.kind} {ext.name!r} is already a parameter of "
                f"{inner.name!r} (rule: a reserved param must not shadow an input parameter)"
            )
    try:
        if ext.kind.relocates_execution:  # admission layers (approve) stay in this process
            variant = build_relocation(
                ext, inner, name=name, config=config, context=context, registry=registry
            )
        else:
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


@dataclass(frozen=True)
class _Built:
    """One combo built as far as it is valid.

    Attributes:
        added: the new ``(key, variant)`` pairs of the valid prefix, innermost first.
        prefix: the names of every variant of the valid prefix (reused ones too).
        refusal: the first invalid layer's error (its message names tool, combo, rule).
        layer: that layer's index in the combo.
        claimed: the refused layer's variant name and key (its config digest ``""`` when
            the config did not validate): a later combo may not mint that name otherwise.

    """

    added: list[tuple[Key, Tool]]
    prefix: list[str]
    refusal: ExtensionError | None = None
    layer: int = 0
    claimed: tuple[str, Key] | None = None


def _build(
    base: Tool,
    combo: Sequence[ComboElement],
    registry: ExtensionRegistry,
    is_taken: Callable[[str], bool],
    minted: Mapping[str, tuple[Key, Tool]],
    context: Any,
    refused: Mapping[str, Key] | None = None,
) -> _Built:
    """Build the layers of ``combo`` in order, up to the first invalid one (see build_combo).

    ``refused`` maps the variant names earlier combos tried and were refused to their
    keys: minting one of them with another config is refused (one name, one variant).
    """
    added: list[tuple[Key, Tool]] = []
    prefix: list[str] = []
    earlier = [(layer.name, ExtensionKind(layer.kind)) for layer in base.stack]
    inner: Tool = base
    key: Key = ()
    claimed: tuple[str, Key] | None = None
    try:
        if not combo:
            raise ExtensionError("a combo needs at least one extension")
        for element in combo:
            name = f"{inner.name}_{element.name}"
            claimed = (name, (*key, (element.name, "")))  # "": a config that did not validate
            ext, config, config_digest = _resolve(element, registry, earlier)
            earlier.append((ext.name, ext.kind))
            key = (*key, (ext.name, config_digest))
            claimed = (name, key)
            recorded = minted.get(name)
            other = recorded[0] if recorded is not None else (refused or {}).get(name)
            if other is not None and other != key:
                raise ExtensionError(
                    f"variant name {name!r} is minted twice with different configs "
                    "(rule: one name, one variant)"
                )
            if recorded is not None:
                inner = recorded[1]
                prefix.append(name)
                continue
            if TOOL_NAME_RE.match(name) is None:
                raise ExtensionError(f"variant name {name!r} must match {TOOL_NAME_PATTERN}")
            if is_taken(name) or any(tool.name == name for _, tool in added):
                raise ExtensionError(
                    f"variant name {name!r} is already taken (rule: an extension mints a new "
                    "name and never replaces a tool)"
                )
            inner = _layer(ext, config, config_digest, inner, name, context, registry)
            added.append((key, inner))
            prefix.append(name)
    except ExtensionError as exc:
        refusal = ExtensionError(
            exc.rule,
            message=f"cannot apply combo {combo_text(combo)} to tool {base.name!r}: {exc.rule}",
            tool=base.name,
            combo=[element.name for element in combo],
        )
        refusal.__cause__ = exc
        return _Built(added, prefix, refusal, len(prefix), claimed)  # one name per valid layer
    return _Built(added, prefix)


def build_combo(
    base: Tool,
    combo: Sequence[ComboElement],
    *,
    registry: ExtensionRegistry | None = None,
    is_taken: Callable[[str], bool] = lambda name: False,
    minted: Mapping[str, tuple[Key, Tool]] | None = None,
    context: Any = None,
) -> list[tuple[Key, Tool]]:
    """Build the variants of one combo over ``base``, innermost first; all or nothing.

    The layers are checked and built in order (innermost first); the first invalid one
    is the refusal. :func:`apply_combos` binds the valid prefix before it; this
    function returns nothing when any layer is refused.

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
        ExtensionError: the first invalid layer's refusal, naming the tool, the combo and
            the rule; nothing is returned.

    """
    built = _build(base, combo, registry or ExtensionRegistry(), is_taken, minted or {}, context)
    if built.refusal is not None:
        raise built.refusal
    return built.added


def apply_combos(
    toolset: Toolset,
    tool: str,
    combos: Sequence[Sequence[ComboElement]],
    *,
    registry: ExtensionRegistry | None = None,
    context: Any = None,
    field_prefix: str = "",
) -> list[Tool]:
    """Apply each combo to the tool ``tool`` of ``toolset``; quarantine from each refused layer.

    The layers of a combo bind in order, innermost first, up to its first invalid layer:
    ``[retry, timeout]`` whose ``timeout`` lacks ``seconds`` binds ``t_retry`` and
    quarantines the combo's variant ``t_retry_timeout`` with the field of the invalid
    layer (``tools.t.extensions[0][1]``), the refusal's message and the valid prefix
    that bound. Every other combo and tool still binds. When an ``approve`` layer is at
    or after the refused one, the base's ungated tools stay hidden (fail closed).

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
    registry = registry or ExtensionRegistry()
    minted: dict[str, tuple[Key, Tool]] = {}
    refused: dict[str, Key] = {}
    added: list[Tool] = []
    for index, combo in enumerate(combos):
        built = _build(base, combo, registry, toolset.__contains__, minted, context, refused)
        for key, variant in built.added:
            toolset.add(variant, owner=f"extensions:{combo_text(combo)}")
            minted[variant.name] = (key, variant)
            added.append(variant)
        if built.refusal is None:
            continue
        if built.claimed is not None:
            refused.setdefault(*built.claimed)
        name = "_".join([tool, *(element.name for element in combo)])
        where = f"{field_prefix}[{index}]" if field_prefix else f"combo[{index}]"
        if combo:
            where += f"[{built.layer}]"
        rule = built.refusal.message
        if built.prefix:
            rule += f" (its valid prefix binds: {', '.join(built.prefix)})"
        toolset.quarantine(name, where, rule, owner="extensions")
        if any(element.name == GATE_EXTENSION for element in combo[built.layer :]):
            toolset.refuse_gate(tool, name)  # its siblings stay hidden: fail closed
    return added
