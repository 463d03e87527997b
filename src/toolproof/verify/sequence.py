"""The check sequence of a run: the built-ins, then the spec's ``[[checks]]`` in order.

A run whose runtime records a ``[policy]`` set has the ``policy`` check right after the
built-ins (:func:`with_recorded`): it is in that run's report like every other check,
and a run without a policy keeps the sequence, report and id it had (docs/policy.md).

An additional check is found by name in the :class:`CheckRegistry` the run or
verification is given: first among checks registered in code, then in the
``toolproof.checks`` entry-point group. Its value is a
:class:`~toolproof.verify.base.Check`, or a factory called with the spec's
``params`` that returns one. The additional checks run after the
built-in sequence in the order the spec lists them; their ids and order are in
every report (``Report.sequence``) and their identities in the runtime descriptor,
so adding, removing, reordering or upgrading one changes both.

A plugin check that raises, or returns something other than a list of
:class:`~toolproof.contract.runs.Finding`, produces one critical finding saying so:
verification never crashes on foreign code, and never passes it silently.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Sequence
from typing import Any

from toolproof.contract.runs import CheckSpec, Finding, PluginDescriptor, Severity
from toolproof.errors import InputError
from toolproof.plugins.loading import plugin_error
from toolproof.plugins.registry import Registry
from toolproof.verify.base import Check, finding
from toolproof.verify.checks import CHECKS
from toolproof.verify.policy import POLICY_CHECK
from toolproof.verify.view import RunView

__all__ = [
    "CHECK_ID_RE",
    "CheckFactory",
    "CheckRegistry",
    "check_for",
    "check_sequence",
    "register_check",
    "with_recorded",
]

CHECK_ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
"""What an additional check's id must match."""

CheckFactory = Callable[[dict[str, Any]], Check]
"""Builds a check from the spec's ``params`` (raise :class:`InputError` on bad ones)."""


class CheckRegistry(Registry[Check | CheckFactory]):
    """Additional checks by name: those registered in code, then ``toolproof.checks`` entry points.

    A new registry is empty (the built-in sequence is not in it: it always runs); the
    composition root builds the one a run or a verification uses and passes it down.
    """

    def __init__(self) -> None:
        super().__init__("check")

    def accept(self, name: str, item: object, origin: str) -> Check | CheckFactory:
        """An entry point's object must be a :class:`Check` or a factory (a callable).

        Raises:
            InputError: it is neither (naming the plugin, its origin and the rule).

        """
        if isinstance(item, Check) or callable(item):
            return typing.cast(Check | CheckFactory, item)
        rule = f"the entry point is a {type(item).__name__}, not a Check or a check factory"
        raise plugin_error("check", name, origin, rule)


def register_check(
    item: Check | CheckFactory, *, name: str | None = None, registry: CheckRegistry | None = None
) -> Check | CheckFactory:
    """Declare a check (named by its id) or a check factory (named ``name``); return it.

    It registers nothing by itself (there is no process-wide registry): a plugin
    package names the check in the ``toolproof.checks`` entry-point group; code that
    builds its own :class:`CheckRegistry` passes it as ``registry`` (or calls
    ``registry.register(name, item)``) and hands that registry to the run, replay or
    verification.

    Args:
        item: a :class:`Check`, or a factory ``params -> Check``.
        name: the factory's name (a check is named by its ``id``).
        registry: the registry to add it to (default: none).

    Returns:
        ``item``.

    Raises:
        InputError: a factory without ``name``, or ``registry`` holds another check under
            that name.

    """
    key = item.id if isinstance(item, Check) else name
    if not key:
        raise InputError("register_check: a check factory needs a name", rule="name")
    return item if registry is None else registry.register(key, item)


def _guarded(check: Check, origin: str) -> Check:
    inner = check.run

    def run(view: RunView) -> list[Finding] | None:
        try:
            found = inner(view)
        except Exception as exc:  # foreign code: reported as a finding, never a crash
            message = f"check {check.id!r} ({origin}) raised {type(exc).__name__}: {exc}"
            return [finding(Severity.CRITICAL, "", message, rule="check-raised")]
        if found is None or (
            isinstance(found, list) and all(isinstance(item, Finding) for item in found)
        ):
            return found
        message = (
            f"check {check.id!r} ({origin}) returned {type(found).__name__}, not a list of "
            "Finding or None"
        )
        return [finding(Severity.CRITICAL, "", message, rule="check-result")]

    return dataclasses.replace(check, run=run, stream=None)  # foreign code runs guarded


def _build(spec: CheckSpec, item: object, origin: str) -> Check:
    params = dict(spec.params)
    if isinstance(item, Check):
        if params:
            raise plugin_error("check", spec.name, origin, "it takes no params")
        check = item
    elif callable(item):
        built = item(params)
        if not isinstance(built, Check):
            rule = f"its factory returned {type(built).__name__}, not a toolproof Check"
            raise plugin_error("check", spec.name, origin, rule)
        check = built if built.params == params else dataclasses.replace(built, params=params)
    else:
        rule = f"the entry point is a {type(item).__name__}, not a Check or a check factory"
        raise plugin_error("check", spec.name, origin, rule)
    if CHECK_ID_RE.match(check.id) is None:
        raise plugin_error(
            "check", spec.name, origin, f"its id {check.id!r} must match {CHECK_ID_RE.pattern}"
        )
    if not isinstance(check.severity, Severity) or not check.invariant:
        raise plugin_error("check", spec.name, origin, "it needs an invariant id and a Severity")
    return check


def check_for(spec: CheckSpec, registry: CheckRegistry) -> tuple[Check, PluginDescriptor]:
    """Build the additional check ``spec`` names, guarded, with its identity.

    Args:
        spec: a ``[[checks]]`` entry of the spec.
        registry: where the name is looked up (code, then entry points).

    Raises:
        InputError: no such check (the message lists the registered ones), or the plugin is
            broken (it names the plugin and the rule).

    """
    known = ", ".join(registry.names()) or "none registered"
    item, origin = registry.require(
        spec.name,
        f"unknown check {spec.name!r}: no registered check and no 'toolproof.checks' "
        f"entry point has that name (registered: {known})",
    )
    try:
        check = _build(spec, item, origin)
    except InputError:
        raise
    except Exception as exc:  # a factory that raises is a broken plugin
        rule = f"its factory raised {type(exc).__name__}: {exc}"
        raise plugin_error("check", spec.name, origin, rule) from exc
    return _guarded(check, origin), check.descriptor(origin)


def check_sequence(
    specs: Sequence[CheckSpec], registry: CheckRegistry | None = None
) -> tuple[tuple[Check, ...], list[PluginDescriptor]]:
    """The built-in checks followed by ``specs``' checks, and the additional checks' identities.

    Args:
        specs: the spec's ``[[checks]]``, in order.
        registry: where their names are looked up (default: a new :class:`CheckRegistry`,
            which finds the installed entry points).

    Raises:
        InputError: a check cannot be built, or two checks share an id (a built-in's too).

    """
    registry = registry if registry is not None else CheckRegistry()
    checks = list(CHECKS)
    descriptors = []
    for spec in specs:
        check, descriptor = check_for(spec, registry)
        if any(existing.id == check.id for existing in checks):
            raise plugin_error(
                "check", spec.name, descriptor.origin, f"its id {check.id!r} is already used"
            )
        checks.append(check)
        descriptors.append(descriptor)
    return tuple(checks), descriptors


def with_recorded(checks: Sequence[Check], policy: bool) -> tuple[Check, ...]:
    """``checks`` with the ``policy`` check after the built-ins when the run records a policy.

    Args:
        checks: a sequence (the built-ins first, then any additional checks).
        policy: whether the run's runtime records a ``[policy]`` set
            (``runtime.toolset.policy``).

    Returns:
        ``checks`` unchanged without a policy (or when ``policy`` is in it already),
        else with :data:`~toolproof.verify.policy.POLICY_CHECK` inserted after the
        leading built-in checks.

    """
    if not policy or any(check.id == POLICY_CHECK.id for check in checks):
        return tuple(checks)
    built_in = {check.id for check in CHECKS}
    at = next((n for n, check in enumerate(checks) if check.id not in built_in), len(checks))
    return (*checks[:at], POLICY_CHECK, *checks[at:])
