"""A resumed session: the recorded steps served from the record, then live (docs/durability.md).

``record_session(..., session_id="nightly-42", resume=True)`` runs the same agent code
again after a crash. :class:`ResumedSession` serves every tool call and model turn the
session recorded (its chain of runs, the crashed segment recovered:
:func:`~toolproof.sessions.resuming.resume_recording`) through the frozen replay matcher
(:class:`~toolproof.sessions.frozen.FrozenSession`): in order, no tool body run, no
model asked, a diverging agent refused as frozen replay refuses it. Once every recorded
step was served, it records live in the session's next segment, step numbers and
idempotency keys going on from the record.

A call that was *cut* (its intent logged, its result never recorded) and is asked again
gets the key it had. A tool that is read-only, idempotent or honours the key runs it
again, with that key, like any live call. Any other tool's cut call is not run: it fails
``outcome_unknown``, recorded in the new segment, naming the call and its key, for a
person to find out and reconcile (``toolproof sessions reconcile``). The decisions are
:class:`~toolproof.sessions.resuming.Resumption`'s, the one resume path ``serve
--record --resume`` takes too.
"""

from __future__ import annotations

from typing import Any

from toolproof.adapters.session import Session
from toolproof.contract.tools import ToolResult
from toolproof.evidence.grounding import Grounding
from toolproof.extensions.approvals.request import Approver
from toolproof.runs.segments import SegmentedRecording
from toolproof.sessions.port import Asked, RecordedTurn
from toolproof.sessions.resuming import Resumption
from toolproof.tools.asking import Askers
from toolproof.tools.toolset import Toolset

__all__ = ["ResumedSession"]


class ResumedSession(Session):
    """A live session that first serves what its crashed run recorded (see the module).

    Attributes:
        served_calls: tool calls served from the record.
        served_turns: model turns served from the record.

    """

    def __init__(
        self,
        toolset: Toolset,
        live: SegmentedRecording,
        resumption: Resumption,
        *,
        approver: Approver | None = None,
        grounding: Grounding | None = None,
        principal: str | None = None,
        askers: Askers | None = None,
    ) -> None:
        super().__init__(toolset, live, None, approver, grounding, principal, askers)
        self._resumption = resumption

    @property
    def served_calls(self) -> int:
        """Tool calls served from the record."""
        return self._resumption.served_calls

    @property
    def served_turns(self) -> int:
        """Model turns served from the record."""
        return self._resumption.served_turns

    async def call(
        self, name: str, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """Serve the call from the record while it holds unserved steps; else call live.

        Raises:
            ReplayRefused: the record holds unserved steps and this call is not the next
                one it recorded (the agent diverged from its crashed run).

        """
        answered = self._resumption.call(name, arguments)
        if answered is not None:
            return answered
        return await super().call(name, arguments, model_call_id=model_call_id)

    def known_turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn | None:
        """The recorded turn while the record holds unserved steps; then ``None`` (live)."""
        return self._resumption.turn(source, key, asked=asked)
