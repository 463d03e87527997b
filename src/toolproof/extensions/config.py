"""``toolproof.toml`` extensions: ``[extensions] modules`` and ``[tools.NAME] extensions``.

``extensions`` is one combo or a list of combos; an element is an extension name
or a table ``{name = "...", config = {...}}``::

    [tools.add]
    extensions = ["retry", {name = "timeout", config = {seconds = 2}}]        # one combo
    # or
    extensions = [["retry"], ["retry", {name = "cache", config = {ttl = 60}}]]  # two combos

Malformed tables are a :class:`ConfigError` naming the file, the tool and the rule;
a combo that cannot be applied, and an extension module or entry point that cannot
be loaded, is quarantined with its reason while everything else binds.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolproof.errors import ConfigError, ExtensionError
from toolproof.extensions.apply import ApplyContext, ComboElement, apply_combos
from toolproof.extensions.approvals.policy import ApprovalPolicy, undeclared_pointers
from toolproof.extensions.registry import ExtensionRegistry
from toolproof.tools.toolset import Toolset

__all__ = ["Combo", "configure_extensions", "normalize_combos"]

Combo = tuple[ComboElement, ...]

_SHAPE = (
    'give one combo, like ["retry", "cache"], or a list of combos, like '
    '[["retry"], ["retry", "cache"]]'
)


def _element(file: str, key: str, value: Any) -> ComboElement:
    if isinstance(value, str):
        if not value:
            raise ConfigError(file, key, "extension name is empty")
        return ComboElement(value)
    if not isinstance(value, dict):
        raise ConfigError(
            file,
            key,
            f"must be an extension name or a table {{name = ..., config = {{...}}}}, "
            f"not {type(value).__name__}",
        )
    extra = sorted(set(value) - {"name", "config"})
    if extra:
        raise ConfigError(file, key, f"unknown key {extra[0]!r} (allowed: name, config)")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(file, key, "needs a non-empty 'name' string")
    config = value.get("config")
    if config is not None and not isinstance(config, dict):
        raise ConfigError(
            file, f"{key}.config", f"config must be a table, not {type(config).__name__}"
        )
    return ComboElement(name, config)


def normalize_combos(file: str, tool: str, value: Any) -> list[Combo]:
    """Normalize a ``[tools.TOOL] extensions`` value into combos.

    Args:
        file: the config file, for errors.
        tool: the tool name, for errors.
        value: the raw TOML value.

    Returns:
        The combos, each a tuple of :class:`ComboElement`, innermost first.

    Raises:
        ConfigError: not a list, an empty list or combo, flat and nested elements
            mixed, an element that is neither a name nor a ``{name, config}`` table,
            extra keys, or a config that is not a table.

    """
    key = f"tools.{tool}.extensions"
    if not isinstance(value, list):
        raise ConfigError(file, key, f"must be a list (rule: {_SHAPE})")
    if not value:
        raise ConfigError(file, key, f"is empty (rule: {_SHAPE})")
    nested = [isinstance(item, list) for item in value]
    if any(nested) and not all(nested):
        raise ConfigError(file, key, f"mixes extensions and combos (rule: {_SHAPE}, not both)")
    if not all(nested):
        return [tuple(_element(file, f"{key}[{j}]", item) for j, item in enumerate(value))]
    combos: list[Combo] = []
    for i, combo in enumerate(value):
        if not combo:
            raise ConfigError(
                file, f"{key}[{i}]", "combo is empty (rule: a combo names at least one extension)"
            )
        combos.append(
            tuple(_element(file, f"{key}[{i}][{j}]", item) for j, item in enumerate(combo))
        )
    return combos


def _load_modules(
    toolset: Toolset, registry: ExtensionRegistry, modules: Sequence[str], search: Path
) -> None:
    for failure in registry.load_entry_points():
        toolset.quarantine(failure.name, failure.field, failure.rule, owner="extensions")
    if modules and str(search) not in sys.path:
        sys.path.insert(0, str(search))
    for index, module in enumerate(modules):
        try:
            registry.import_module(module)
        except ExtensionError as exc:
            toolset.quarantine(
                module, f"extensions.modules[{index}]", exc.message, owner="extensions"
            )


def _check_global_rules(
    toolset: Toolset, file: str, plans: list[tuple[str, list[Combo]]], approvals: Mapping[str, Any]
) -> None:
    """Refuse an ``[approvals]`` rule that could never gate a tool it is the policy of.

    Raises:
        ConfigError: (key ``approvals.rules[i]``) a rule whose ``when`` holds for a tool
            gated by an ``approve`` element without its own config points at a member
            that tool's input schema does not declare.

    """
    rules = approvals.get("rules")
    if not rules:
        return
    try:
        policy = ApprovalPolicy.model_validate(dict(approvals))
    except ValueError:
        return  # the [approvals] table itself is refused where it is validated
    for tool, combos in plans:
        gated = any(e.name == "approve" and e.config is None for combo in combos for e in combo)
        base = toolset.get(tool) if gated else None
        if base is None:
            continue
        spec = base.spec
        for index, pointer, token in undeclared_pointers(
            policy, spec.annotations, spec.input_schema
        ):
            raise ConfigError(
                file,
                f"approvals.rules[{index}]",
                f"points at {pointer!r}, but tool {tool!r} (gated by tools.{tool}.extensions) "
                f"declares no {token!r} there in its input schema: the rule could never gate "
                f"it, and the calls it is meant to stop would run ungated (rule: a global "
                "approval rule points into every tool it gates; give that approve element "
                'its own policy, {name = "approve", config = {...}}, or the rule a `when` '
                "the tool does not meet)",
            )


def configure_extensions(
    toolset: Toolset,
    *,
    file: str | Path,
    modules: Sequence[str] = (),
    tools: Mapping[str, Any] | None = None,
    backends: Mapping[str, Mapping[str, Any]] | None = None,
    registry: ExtensionRegistry | None = None,
    approvals: Mapping[str, Any] | None = None,
    approver: Any = None,
) -> None:
    """Load extension modules and entry points, then apply every tool's combos.

    Args:
        toolset: the unsealed Toolset with every base tool bound.
        file: the ``toolproof.toml`` (relative paths are relative to its directory).
        modules: ``[extensions] modules``, imported in order.
        tools: tool name -> raw ``extensions`` value, in file order.
        backends: the ``[backends.NAME]`` tables, handed to backend factories;
            ``[backends.sandbox]`` is also the config under every ``sandbox`` element's
            own (so the profile is in the variant's fingerprint).
        registry: where names resolve (default: a new registry of the built-ins;
            ``[extensions] modules`` and the entry points are loaded into it).
        approvals: the ``[approvals]`` table: the config of every ``approve`` element
            that gives none of its own (so the policy is in the variant's fingerprint).
        approver: the approver callback for the ``approve`` layers, or ``None``.

    Raises:
        ConfigError: a malformed ``extensions`` value, a tool name no source binds, or
            an ``[approvals]`` rule pointing where a tool it gates declares nothing.

    """
    path = Path(file)
    registry = registry or ExtensionRegistry()
    plans = [
        (tool, normalize_combos(str(path), tool, value)) for tool, value in (tools or {}).items()
    ]
    if approvals is not None:
        _check_global_rules(toolset, str(path), plans, approvals)
        plans = [
            (
                tool,
                [
                    tuple(
                        ComboElement(e.name, dict(approvals))
                        if e.name == "approve" and e.config is None
                        else e
                        for e in combo
                    )
                    for combo in combos
                ],
            )
            for tool, combos in plans
        ]
    sandbox = (backends or {}).get("sandbox")
    if sandbox:  # the Toolset-wide profile under each sandbox layer's own (in its digest)
        plans = [
            (
                tool,
                [
                    tuple(
                        ComboElement(e.name, {**sandbox, **(e.config or {})})
                        if e.name == "sandbox"
                        else e
                        for e in combo
                    )
                    for combo in combos
                ],
            )
            for tool, combos in plans
        ]
    _load_modules(toolset, registry, modules, path.parent.resolve())
    quarantined = {item.name: item for item in toolset.quarantined}
    context = ApplyContext(
        toolset=toolset,
        config_path=path.resolve(),
        base_dir=path.parent.resolve(),
        backends=dict(backends or {}),
        approver=approver,
    )
    for tool, combos in plans:
        key = f"tools.{tool}.extensions"
        if tool not in toolset:
            if tool not in quarantined:
                known = ", ".join(toolset.names()) or "none"
                raise ConfigError(
                    str(path), f"tools.{tool}", f"no tool named {tool!r} is bound (known: {known})"
                )
            for index, combo in enumerate(combos):
                name = "_".join([tool, *(element.name for element in combo)])
                toolset.quarantine(
                    name,
                    f"{key}[{index}]",
                    f"base tool {tool!r} is quarantined: {quarantined[tool].rule}",
                    owner="extensions",
                )
            continue
        apply_combos(toolset, tool, combos, registry=registry, context=context, field_prefix=key)
