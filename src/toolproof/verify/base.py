"""The shape of a check: a plain object with a stable id, an invariant and a severity.

Built-in and plugged-in checks are the same :class:`Check` objects; a plugin
check's identity (id, version, invariant, severity and parameters) enters the
runtime descriptor through :meth:`Check.descriptor`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolproof.bundle.trace import TraceLine
from toolproof.contract.runs import Finding, PluginDescriptor, Severity
from toolproof.identity import digest_json
from toolproof.verify.compact import KeySet, compact_key
from toolproof.verify.view import RunView

__all__ = [
    "MAX_FINDINGS",
    "Check",
    "Findings",
    "KeySet",
    "TraceState",
    "compact_key",
    "finding",
    "stream_check",
]

MAX_FINDINGS = 50
"""Findings kept per check; a check stops looking after that many."""


class TraceState(Protocol):
    """A check's state over one pass of the trace: fed each line, then asked once.

    ``feed`` is called with every line of ``trace.jsonl`` in order (each a valid,
    canonical event); ``finish`` returns the findings. A state keeps what it needs
    of past events, never the events themselves, so memory does not grow with the
    trace beyond the small per-call sets a check documents.
    """

    def feed(self, line: TraceLine) -> None:
        """Take the next line of the trace."""

    def finish(self) -> list[Finding]:
        """The findings, once every line was fed."""


class Findings(list[Finding]):
    """A list of findings that keeps at most :data:`MAX_FINDINGS` (later ones are dropped)."""

    def add(self, item: Finding) -> None:
        """Append ``item`` unless the list is full."""
        if len(self) < MAX_FINDINGS:
            self.append(item)


def stream_check(
    view: RunView, factory: Callable[[RunView], TraceState | None]
) -> list[Finding] | None:
    """Run one streaming check over ``view`` on its own (one pass over the trace).

    Returns:
        Its findings, or ``None`` when it cannot run: ``factory`` returned ``None`` (an
        input it needs did not parse) or a trace line is not a valid event.

    """
    state = factory(view)
    if state is None:
        return None
    view.scan([state.feed])
    return state.finish() if view.trace_ok else None


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
        stream: for a check that reads the trace: builds its :class:`TraceState` for a
            view (``None`` when an input it needs did not parse). ``run_checks`` then
            feeds every such state in one pass over the trace instead of calling
            ``run``, and skips the check when a trace line is not a valid event.

    """

    id: str
    invariant: str
    severity: Severity
    summary: str
    run: Callable[[RunView], list[Finding] | None]
    version: str = "1"
    params: dict[str, Any] = field(default_factory=dict)
    stream: Callable[[RunView], TraceState | None] | None = None

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
