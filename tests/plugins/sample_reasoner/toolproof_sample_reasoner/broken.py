"""Deliberately broken variants, each breaking one rule the conformance kit enforces."""

from __future__ import annotations

import itertools

from toolproof.contract.runs import Finding, Severity
from toolproof.verify.base import Check
from toolproof.verify.view import RunView
from toolproof_sample_reasoner.reasoner import QuoteReasoner


class NormalizingReasoner(QuoteReasoner):
    """Breaks INV-DERIVED-GROUNDED: it normalizes (upper-cases) the text it cites."""

    name = "sample-quotes-broken"

    def shown(self, text: str) -> str:
        """The cited text, re-encoded: no longer the support's bytes."""
        return text.upper()


_calls = itertools.count()


def _flaky(view: RunView) -> list[Finding] | None:
    if next(_calls) % 2:
        return [Finding(severity=Severity.ERROR, message="flaky: found something this time")]
    return []


flaky_check = Check(
    id="sample-statement-quotes-broken",
    invariant="INV-SAMPLE-QUOTES",
    severity=Severity.ERROR,
    summary="breaks determinism: finds something on every other call",
    run=_flaky,
)


def not_a_reasoner() -> str:
    """Not a Reasoner subclass: a broken entry point."""
    return "no"
