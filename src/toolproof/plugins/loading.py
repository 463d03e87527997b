"""Find a plugin by name in its entry-point group, or say exactly why it cannot be used.

Each seam has a group: ``toolproof.reasoners`` (a
:class:`~toolproof.evidence.reasoners.Reasoner` subclass),
``toolproof.checks`` (a :class:`~toolproof.verify.base.Check` or a factory taking
the spec's params), ``toolproof.retrieval`` (a retriever factory),
``toolproof.runtimes`` (a :class:`~toolproof.runs.runtime_plugin.RuntimePlugin`)
and ``toolproof.extensions`` (an :class:`~toolproof.extensions.extension.Extension`,
a module of them, or a ``register(registry)`` callable). :func:`load_entry_point` is
the one function that loads an entry point, for every group; the registries
(:class:`~toolproof.plugins.registry.Registry` and
:class:`~toolproof.extensions.registry.ExtensionRegistry`) call it. A plugin that is
declared twice, fails to import, or is not what its group expects is an
:class:`~toolproof.errors.InputError` naming the plugin, its entry point and the rule
it breaks; a run refuses to start and writes nothing.
"""

from __future__ import annotations

import importlib.metadata

from toolproof.errors import FOREIGN_CODE_ERRORS, InputError, foreign_failure

__all__ = ["ENTRY_POINT_GROUPS", "entry_point_names", "load_entry_point", "plugin_error"]

ENTRY_POINT_GROUPS = {
    "reasoner": "toolproof.reasoners",
    "check": "toolproof.checks",
    "retrieval": "toolproof.retrieval",
    "runtime": "toolproof.runtimes",
    "extension": "toolproof.extensions",
}
"""The entry-point group of each seam, by plugin kind."""


def plugin_error(kind: str, name: str, origin: str, rule: str) -> InputError:
    """The error for a plugin that cannot be used.

    Args:
        kind: the seam (a key of :data:`ENTRY_POINT_GROUPS`).
        name: the plugin's name.
        origin: where it came from (``distribution:module:attr`` of its entry point,
            ``registered`` for one added in code).
        rule: what is wrong, in words.

    Returns:
        An :class:`InputError` with fields ``plugin``, ``kind``, ``origin`` and ``rule``.

    """
    return InputError(
        f"{kind} plugin {name!r} ({origin}) cannot be used: {rule}",
        plugin=name,
        kind=kind,
        origin=origin,
        rule=rule,
    )


def entry_point_names(kind: str) -> list[str]:
    """The names installed in the ``kind`` group, sorted, each once.

    Args:
        kind: a key of :data:`ENTRY_POINT_GROUPS`.

    """
    group = ENTRY_POINT_GROUPS[kind]
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=group)})


def load_entry_point(kind: str, name: str) -> tuple[object, str] | None:
    """Load the entry point ``name`` of the ``kind`` group.

    Args:
        kind: a key of :data:`ENTRY_POINT_GROUPS`.
        name: the entry point's name.

    Returns:
        ``(object, origin)``, origin being ``distribution:module:attr``; ``None`` when no
        installed distribution declares ``name``.

    Raises:
        InputError: two entry points declare ``name`` differently, or loading it raised
            (the message names the exception; the exception is the ``__cause__``).

    """
    group = ENTRY_POINT_GROUPS[kind]
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        return None
    values = sorted({ep.value for ep in found})
    if len(values) > 1:
        raise plugin_error(kind, name, " and ".join(values), f"declared twice in group {group!r}")
    entry = found[0]
    dist = entry.dist.name if entry.dist is not None else "?"
    origin = f"{dist}:{entry.value}"
    try:
        value = entry.load()
    except FOREIGN_CODE_ERRORS as exc:  # any import-time failure of foreign code is reported
        rule = f"loading entry point {entry.value!r} raised {foreign_failure(exc)}"
        raise plugin_error(kind, name, origin, rule) from exc
    return value, origin
