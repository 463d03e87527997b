"""What the executor did to a plan: :class:`ExecutionOutcome`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolproof.contract.evidence import Claim
from toolproof.evidence.reasoners import StepOutput

__all__ = ["ExecutionOutcome"]


@dataclass
class ExecutionOutcome:
    """What the executor did.

    Attributes:
        claims: every claim emitted, in order.
        outputs: every run node's output, by node id.
        failures: every failure seen (tool failures, bad references, budget stops).
        stopped: whether a budget stopped the run.
        step_seconds: wall-clock seconds per node.

    """

    claims: list[Claim] = field(default_factory=list)
    outputs: dict[str, StepOutput] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    step_seconds: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        # short on purpose (as RunOutcome's): asyncio.run reprs a finished task's
        # result, and the full repr of every step output of a 2,000-call run costs
        # a quarter of the run
        return (
            f"ExecutionOutcome(claims={len(self.claims)}, outputs={len(self.outputs)}, "
            f"failures={len(self.failures)}, stopped={self.stopped})"
        )
