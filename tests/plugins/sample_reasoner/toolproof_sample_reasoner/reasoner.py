"""``sample-quotes``: one claim per successful step, quoting the first text the step returned."""

from __future__ import annotations

from typing import Any

from toolproof.contract import Claim
from toolproof.contract.evidence import Citation, ClaimStatus, ClaimType
from toolproof.evidence.encoding import locate
from toolproof.evidence.reasoners import ReasonerRequest, StepOutput
from toolproof.plugins import Reasoner


def first_text(value: Any) -> list[str] | None:
    """The path of the first string in ``value`` (keys in sorted order), or ``None``."""
    if isinstance(value, str):
        return [] if value else None
    if isinstance(value, dict):
        for key in sorted(value):
            if isinstance(value[key], str) and value[key]:
                return [key]
    return None


class QuoteReasoner(Reasoner):
    """Quote each successful step; a step with no text gets ``insufficient_evidence``."""

    name = "sample-quotes"
    version = "1"

    def quote(self, output: StepOutput, request: ReasonerRequest) -> Claim:
        """The claim for one step's output."""
        path = first_text(output.value) if output.ok and output.evidence else None
        if path is None:
            return Claim(
                statement=f"step {output.step} says something",
                type=ClaimType.DERIVED,
                status=ClaimStatus.INSUFFICIENT_EVIDENCE,
                reasoner=self.label,
                reason=output.reason or "the step returned no text",
            )
        start, end, _ = locate(output.value, path)
        record = output.evidence[0]
        support = request.store.support(record.id, start, end)
        text = request.store.read(record.id)[start:end].decode("utf-8")
        return Claim(
            statement=f"step {output.step} says: {self.shown(text)}",
            type=ClaimType.DERIVED,
            status=ClaimStatus.VALIDATED,
            supports=[support],
            citations=[Citation(support=0, text=self.shown(text))],
            confidence=1.0,
            reasoner=self.label,
        )

    def shown(self, text: str) -> str:
        """The text as quoted (exactly the cited bytes)."""
        return text

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """One claim per call or retrieve step, in step order."""
        return [
            self.quote(output, request)
            for step, output in sorted(request.outputs.items())
            if step not in ("derive", "verify", "finalize")
        ]
