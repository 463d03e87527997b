"""How a verification report reads on a terminal: row status by severity, every finding."""

from __future__ import annotations

from rich.markup import escape

from toolproof.adapters.cli.app import out_console
from toolproof.contract.runs import CheckResult, Finding, Policy, Report

__all__ = ["count", "finding_line", "print_findings", "row_status"]


def count(number: int, noun: str) -> str:
    """``1 finding``, ``2 findings``, ``0 findings``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def row_status(result: CheckResult, policy: Policy) -> str:
    """A check's status as its findings' severity makes it under ``policy``.

    ``failed`` only when a finding fails under the policy; a check whose findings are
    all below the policy's floor shows the highest severity it found (``info``,
    ``warning``), not ``failed``; otherwise the stored status (``passed``, ``skipped``).
    """
    if not result.findings:
        return result.status
    if any(policy.fails(finding.severity) for finding in result.findings):
        return "failed"
    return max((finding.severity for finding in result.findings), key=lambda s: s.rank).value


def finding_line(check: str, finding: Finding) -> str:
    """``[check] severity file: message`` (no markup)."""
    where = f"{finding.file}: " if finding.file else ""
    return f"[{check}] {finding.severity.value} {where}{finding.message}"


def print_findings(report: Report) -> None:
    """Print every finding of ``report``: failing ones in red, the others in yellow."""
    for result in report.results:
        for finding in result.findings:
            colour = "red" if report.policy.fails(finding.severity) else "yellow"
            out_console.print(f"  [{colour}]{escape(finding_line(result.check, finding))}[/]")
