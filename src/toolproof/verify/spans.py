"""``support-spans``: every support interval lies within its evidence item and hashes right."""

from __future__ import annotations

from toolproof.contract.runs import Finding, Severity
from toolproof.errors import VerificationError
from toolproof.identity import digest
from toolproof.verify.base import MAX_FINDINGS, finding
from toolproof.verify.view import RunView

__all__ = ["check_support_spans"]

_CRIT = Severity.CRITICAL


def check_support_spans(view: RunView) -> list[Finding] | None:
    """Every support interval lies within its evidence file and hashes to its ``sha256``."""
    if view.claims is None:
        return None
    out: list[Finding] = []
    for claim in view.claims:
        for number, support in enumerate(claim.supports):
            rel = view.evidence.path_of(support.evidence)
            try:
                present = support.evidence in view.evidence
                size = view.evidence.size(support.evidence) if present else 0
                data = (
                    view.evidence.read(support.evidence, support.start, support.end)
                    if present and support.end <= size
                    else b""
                )
            except VerificationError as exc:
                message = f"claim {claim.id} support #{number}: {exc.message}"
                out.append(finding(_CRIT, rel, message))
                continue
            if not present:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number} cites {rel}, which is missing",
                    )
                )
                continue
            if support.end > size:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number} "
                        f"[{support.start}, {support.end}) is outside {rel} "
                        f"({size} bytes)",
                    )
                )
                continue
            if digest(data) != support.sha256:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number}: bytes "
                        f"[{support.start}, {support.end}) of {rel} do not hash to "
                        f"{support.sha256}",
                    )
                )
    return out[:MAX_FINDINGS]
