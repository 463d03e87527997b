"""The tools an agent session presented to its framework: stored, served again, compared.

A recorded session stores its exposed tools as they were presented to the agent's
framework (:class:`~toolproof.contract.tools.PresentedTools`, ``runtime.json``'s
``presented``; format 1). Frozen, :func:`specs_of` gives them back as specs, so the
session's adapters present the recorded tools with no Toolset; given one,
:func:`presented_changes` names every field in which its tools differ from the recorded
ones (docs/agents.md, "What a run stores of its tools").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from toolproof.contract.tools import PresentedTool, PresentedTools, ToolSpec

__all__ = ["present", "presented_changes", "recorded_specs", "specs_of"]

_SHOWN = 80
"""The most characters of a JSON value a change shows (longer ones end in ``...``)."""
_FIELDS = ("description", "input_schema", "output_schema", "strict")


def present(specs: Iterable[ToolSpec]) -> PresentedTools:
    """The record of ``specs`` as a session presents them (in order; never strict).

    Args:
        specs: the session's exposed tools and variants, in the Toolset's order.

    Returns:
        The record (format 1) ``runtime.json`` stores as ``presented``.

    """
    return PresentedTools(
        tools=[
            PresentedTool(
                name=spec.name,
                description=spec.description,
                input_schema=dict(spec.input_schema),
                output_schema=None if spec.output_schema is None else dict(spec.output_schema),
            )
            for spec in specs
        ]
    )


def specs_of(presented: PresentedTools) -> tuple[ToolSpec, ...]:
    """The recorded tools as specs, for the session's adapters to present again, in order."""
    return tuple(
        ToolSpec(
            name=tool.name,
            description=tool.description,
            input_schema=dict(tool.input_schema),
            output_schema=None if tool.output_schema is None else dict(tool.output_schema),
        )
        for tool in presented.tools
    )


def recorded_specs(presented: PresentedTools | None, names: Iterable[str]) -> list[ToolSpec]:
    """What a cassette serves with no Toolset: the tools as presented, or open ones.

    Args:
        presented: the run's record of its tools as presented (``None``: it has none).
        names: the run's recorded tool names (used when ``presented`` is ``None``).

    Returns:
        :func:`specs_of` ``presented``; without it, one spec per name with the
        description ``"<name>, served from a recorded run"`` and the open schema
        ``{"type": "object"}``.

    """
    if presented is not None:
        return list(specs_of(presented))
    return [
        ToolSpec(
            name=name,
            description=f"{name}, served from a recorded run",
            input_schema={"type": "object"},
        )
        for name in names
    ]


def presented_changes(recorded: PresentedTools, current: PresentedTools) -> list[str]:
    """Every difference between the recorded tools and the current ones, field by field.

    Returns:
        One entry per difference, in the recorded order, then the added tools:
        ``read_file description "Read a file." -> "Read it."``, ``read_file
        input_schema.properties.path.type "string" -> "integer"``, ``read_file
        input_schema.properties.limit added: {"type": "integer"}`` (or ``removed:``),
        ``tool lookup removed``, ``tool extra added``, ``the order changed: a, b ->
        b, a``; empty when they are the same. Values are JSON, at most 80 characters.

    """
    before = {tool.name: tool for tool in recorded.tools}
    after = {tool.name: tool for tool in current.tools}
    changes: list[str] = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            changes.append(f"tool {name} removed")
            continue
        for field in _FIELDS:
            _walk(changes, f"{name} {field}", getattr(old, field), getattr(new, field))
    changes.extend(f"tool {name} added" for name in after if name not in before)
    kept = [name for name in before if name in after]
    now = [name for name in after if name in before]
    if kept != now:
        changes.append(f"the order changed: {', '.join(kept)} -> {', '.join(now)}")
    return changes


def _walk(changes: list[str], where: str, old: Any, new: Any) -> None:
    """Append the differences of two JSON values at ``where`` (objects: key by key)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            inner = f"{where}.{key}"
            if key not in new:
                changes.append(f"{inner} removed: {_shown(old[key])}")
            elif key not in old:
                changes.append(f"{inner} added: {_shown(new[key])}")
            else:
                _walk(changes, inner, old[key], new[key])
        return
    if old != new or type(old) is not type(new):
        changes.append(f"{where} {_shown(old)} -> {_shown(new)}")


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."
