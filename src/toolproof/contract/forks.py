"""Where a forked run left its parent: ``runtime.json``'s ``forked_from`` (docs/runs.md).

``replay_session(run, agent, toolset=..., then="live")`` serves a recorded run until the
first divergent request, then goes on live in a new run whose runtime names the parent
run and the divergence (:mod:`toolproof.adapters.forked`).
"""

from __future__ import annotations

from pydantic import Field

from toolproof.contract.base import CanonicalModel

__all__ = ["ForkedFrom"]


class ForkedFrom(CanonicalModel):
    """The parent run of a fork and where the fork left it.

    Attributes:
        run: the parent's run id (``run_<hex>``).
        event: the index of the parent's trace event the replay matcher refused at (the
            first divergent tool call or model request; a step the agent never asked, or
            another answer), or ``None``: the agent never diverged.
        reason: the matcher's refusal, one line (what the agent asked otherwise).

    """

    run: str = Field(pattern=r"^run_[0-9a-f]{64}$")
    event: int | None = Field(default=None, ge=0)
    reason: str = Field(min_length=1)
