"""How a verification report reads on a terminal: row status by severity, every finding."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from toolproof.adapters.cli.app import err_console, out_console

if TYPE_CHECKING:
    from toolproof.contract.runs import CheckResult, Finding, Policy, Report
    from toolproof.verify.verifier import Verification

__all__ = ["count", "finding_line", "print_findings", "print_verification", "row_status"]


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


def print_verification(verification: Verification, directory: Path) -> None:
    """The report's table, its notes and the failures, as ``toolproof verify`` prints them."""
    report = verification.report
    if report is not None:
        title = f"verify {verification.run_id}"
        if verification.run_id != directory.name:
            title += f" (directory {directory.name})"
        table = Table(title=title)
        for column in ("check", "invariant", "status", "findings"):
            table.add_column(column)
        for result in report.results:
            table.add_row(
                result.check,
                result.invariant,
                row_status(result, report.policy),
                str(len(result.findings)),
            )
        out_console.print(table)
        for result in report.results:
            for finding in result.findings:
                if not report.policy.fails(finding.severity):
                    out_console.print(
                        f"[yellow]note[/] {escape(finding_line(result.check, finding))}"
                    )
    for note in verification.notes:  # acted-once: an outcome_unknown call to reconcile
        out_console.print(f"[yellow]note[/] {escape(str(note))}")
    for failure in verification.failures:
        err_console.print(f"[bold red]FAIL[/] {escape(str(failure))}")
