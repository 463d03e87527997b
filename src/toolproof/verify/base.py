"""The shape of a check: a plain object with a stable id, an invariant and a severity."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolproof.contract.runs import Finding, Severity
from toolproof.verify.view import RunView

__all__ = ["MAX_FINDINGS", "Check", "finding"]

MAX_FINDINGS = 50
"""Findings kept per check; a check stops looking after that many."""


@dataclass(frozen=True)
class Check:
    """One check of the ordered sequence.

    Attributes:
        id: the stable check id (``trace-chain``); part of the report identity.
        invariant: the stable id of the invariant it enforces (``INV-TRACE-CHAIN``).
        severity: the default severity of its findings.
        summary: what it checks, in one line (for docs and ``--help``).
        run: the check; returns its findings, or ``None`` when it cannot run (an input
            it needs did not parse; the ``schema`` check reports that).

    """

    id: str
    invariant: str
    severity: Severity
    summary: str
    run: Callable[[RunView], list[Finding] | None]


def finding(severity: Severity, file: str, message: str, **detail: Any) -> Finding:
    """Build a :class:`Finding` (``detail`` values must be JSON)."""
    return Finding(severity=severity, file=file, message=message, detail=detail)
