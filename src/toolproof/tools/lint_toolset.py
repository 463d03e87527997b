"""Linting the base tools of a Toolset at bind, and quarantining per ``[lint] fail_on``.

:func:`apply_lint` runs when a ``toolproof.toml`` is loaded, after the sources bind
and before the lock is checked: every base tool's definition is linted
(:func:`toolproof.tools.lint.lint_definition`, with the Toolset's other tools for
``shadowing``), the findings are kept in ``toolset.resources[LINT_FINDINGS]`` (also
those of the tools it then quarantines), and each tool with a finding at or above
``fail_on`` is withdrawn and quarantined: field the finding's JSON pointer, rule
``lint <rule> (<severity>) at <pointer> char N (byte M): "<escaped text>": ...``.
Findings below ``fail_on`` are logged (``toolproof.config``, WARNING). The lock
records each bound tool's findings (:func:`toolset_findings`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from toolproof.tools.definition import locked_spec
from toolproof.tools.lint import Allow, FailOn, Finding, OtherTool, escape_text, lint_definition
from toolproof.tools.resources import MCP_SERVERS, ResourceKey
from toolproof.tools.toolset import Toolset

__all__ = [
    "LINT_FINDINGS",
    "apply_lint",
    "failing_findings",
    "lint_toolset",
    "other_tools",
    "toolset_findings",
]

logger = logging.getLogger("toolproof.config")

LINT_FINDINGS = ResourceKey[dict[str, tuple[Finding, ...]]]("lint.findings")
"""Per base tool name: its lint findings at bind (``()`` for a clean tool), including
the tools the lint then quarantined."""


def other_tools(toolset: Toolset) -> list[OtherTool]:
    """Every base tool of ``toolset`` as a ``shadowing`` candidate (with its MCP name)."""
    servers = toolset.resources.get(MCP_SERVERS) or {}
    out = []
    for tool in toolset:
        if tool.base is not None:
            continue
        owner = toolset.owner(tool.name)
        kind, _, ref = owner.partition(":")
        reported = servers.get(ref, {}).get("names", {}).get(tool.name) if kind == "mcp" else None
        aliases = (reported,) if reported and reported != tool.name else ()
        out.append(OtherTool(tool.name, owner, aliases))
    return out


def lint_toolset(toolset: Toolset) -> dict[str, tuple[Finding, ...]]:
    """The findings of every base tool ``toolset`` binds now, by name (sorted).

    Each definition is :func:`~toolproof.tools.definition.locked_spec` of the tool's
    spec; ``shadowing`` looks for the names of the other base tools of another owner.
    """
    others = other_tools(toolset)
    return {
        tool.name: tuple(
            lint_definition(
                locked_spec(tool.spec),
                tool=tool.name,
                owner=toolset.owner(tool.name),
                others=others,
            )
        )
        for tool in sorted(toolset, key=lambda t: t.name)
        if tool.base is None
    }


def toolset_findings(toolset: Toolset) -> dict[str, tuple[Finding, ...]]:
    """The findings kept at bind (``resources[LINT_FINDINGS]``), or :func:`lint_toolset` now."""
    kept = toolset.resources.get(LINT_FINDINGS)
    return kept if kept is not None else lint_toolset(toolset)


def failing_findings(
    findings: Sequence[Finding], fail_on: FailOn, allow: Sequence[Allow] = ()
) -> list[Finding]:
    """The findings at or above ``fail_on`` that no ``allow`` entry lets pass."""
    return [
        finding
        for finding in findings
        if fail_on.fails(finding.severity) and not any(a.allows(finding) for a in allow)
    ]


def apply_lint(
    toolset: Toolset, fail_on: FailOn, allow: Sequence[Allow] = ()
) -> dict[str, tuple[Finding, ...]]:
    """Lint the (unsealed) base tools and quarantine each with a finding at or above ``fail_on``.

    Args:
        toolset: the Toolset being built (sources bound, extensions not applied).
        fail_on: ``[lint] fail_on``; ``never`` quarantines nothing.
        allow: ``[[lint.allow]]``: findings these let pass never quarantine; an
            entry that lets no finding pass is logged (WARNING), so a stale or
            misspelt one is noticed.

    Returns:
        Every base tool's findings, by name (also stored as
        ``toolset.resources[LINT_FINDINGS]``).

    Raises:
        ToolsetSealedError: ``toolset`` is sealed.

    """
    report = toolset.resources[LINT_FINDINGS] = lint_toolset(toolset)
    for entry in allow:
        if not any(entry.allows(f) for findings in report.values() for f in findings):
            logger.warning(
                "lint: [[lint.allow]] tool = %r, rule = %r lets no finding pass",
                entry.tool,
                entry.rule,
            )
    for name, findings in report.items():
        failing = failing_findings(findings, fail_on, allow)
        if failing:
            first = failing[0]
            more = f"; {len(failing) - 1} more at or above fail_on" if len(failing) > 1 else ""
            toolset.withdraw(
                name,
                escape_text(first.field),
                f"lint {first}{more} ([lint] fail_on = {fail_on.value!r}; "
                "see toolproof tools lint)",
                owner=toolset.owner(name),
            )
        elif findings:
            logger.warning(
                "lint: tool %s has %d findings below [lint] fail_on = %r or allowed, the first: %s",
                name,
                len(findings),
                fail_on.value,
                findings[0],
            )
    return report
