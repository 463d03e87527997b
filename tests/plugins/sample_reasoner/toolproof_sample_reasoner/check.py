"""``sample-statement-quotes``: a validated claim's statement contains each text it cites."""

from __future__ import annotations

from toolproof.contract.evidence import ClaimStatus
from toolproof.contract.runs import Finding, Severity
from toolproof.verify.base import Check
from toolproof.verify.view import RunView


def run(view: RunView) -> list[Finding] | None:
    """A finding per validated claim whose statement does not quote a citation."""
    if view.claims is None:
        return None
    out = []
    for number, claim in enumerate(view.claims):
        if claim.status != ClaimStatus.VALIDATED:
            continue
        for citation in claim.citations:
            if citation.text not in claim.statement:
                out.append(
                    Finding(
                        severity=Severity.ERROR,
                        file="claims.json",
                        message=f"claim {number} does not quote its citation "
                        f"{citation.text!r}; put the cited text in the statement",
                        detail={"claim": number},
                    )
                )
    return out


statement_quotes = Check(
    id="sample-statement-quotes",
    invariant="INV-SAMPLE-QUOTES",
    severity=Severity.ERROR,
    summary="a validated claim's statement contains the text of each of its citations",
    run=run,
    version="1",
)
