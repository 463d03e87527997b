"""The shape of a check: a plain object with a stable id, an invariant and a severity.

Built-in and plugged-in checks are the same :class:`Check` objects; a plugin
check's identity (id, version, invariant, severity and parameters) enters the
runtime descriptor through :meth:`Check.descriptor`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.runs import Finding, PluginDescriptor, Severity
from toolproof.identity import digest_json
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
        version: the implementation version; bump it when what it finds changes.
        params: the parameters it was built with (part of its identity).

    """

    id: str
    invariant: str
    severity: Severity
    summary: str
    run: Callable[[RunView], list[Finding] | None]
    version: str = "1"
    params: dict[str, Any] = field(default_factory=dict)

    def descriptor(self, origin: str = "toolproof") -> PluginDescriptor:
        """The check's identity: id, version and a digest of invariant, severity and params."""
        config = {
            "invariant": self.invariant,
            "severity": self.severity.value,
            "params": self.params,
        }
        return PluginDescriptor(
            kind="check",
            name=self.id,
            version=self.version,
            config_digest=digest_json(config),
            origin=origin,
        )


def finding(severity: Severity, file: str, message: str, **detail: Any) -> Finding:
    """Build a :class:`Finding` (``detail`` values must be JSON)."""
    return Finding(severity=severity, file=file, message=message, detail=detail)
