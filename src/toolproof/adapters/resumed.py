"""A resumed session: the recorded steps served from the record, then live (docs/durability.md).

``record_session(..., session_id="nightly-42", resume=True)`` runs the same agent code
again after a crash. :class:`ResumedSession` serves every tool call and model turn the
session recorded (its chain of runs, the crashed segment recovered:
:func:`~toolproof.runs.resume.prepare_resume`) through the frozen replay matcher
(:class:`~toolproof.sessions.frozen.FrozenSession`): in order, no tool body run, no
model asked, a diverging agent refused as frozen replay refuses it. Once every recorded
step was served, it records live in the session's next segment, step numbers and
idempotency keys going on from the record.

A call that was *cut* (its intent logged, its result never recorded) and is asked again
gets the key it had. A tool that is read-only, idempotent or honours the key runs it
again, with that key, like any live call. Any other tool's cut call is not run: it fails
``outcome_unknown``, recorded in the new segment, naming the call and its key, for a
person to find out and reconcile (``toolproof sessions reconcile``).
"""

from __future__ import annotations

from typing import Any

from toolproof.adapters.session import Session
from toolproof.contract.tools import ToolResult
from toolproof.errors import InputError, ToolCallError
from toolproof.evidence.grounding import Grounding
from toolproof.extensions.approvals.request import Approver
from toolproof.runs.resume import Resumed
from toolproof.runs.segments import SegmentedRecording
from toolproof.sessions.frozen import FrozenSession
from toolproof.sessions.port import RecordedTurn
from toolproof.tools.asking import Askers
from toolproof.tools.observe import Observed
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
        record: FrozenSession,
        resumed: Resumed,
        *,
        approver: Approver | None = None,
        grounding: Grounding | None = None,
        principal: str | None = None,
        askers: Askers | None = None,
    ) -> None:
        super().__init__(toolset, live, None, approver, grounding, principal, askers)
        self._record, self._resumed, self._recording = record, resumed, live
        self.served_calls = 0
        self.served_turns = 0

    async def call(
        self, name: str, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """Serve the call from the record while it holds unserved steps; else call live.

        Raises:
            ReplayRefused: the record holds unserved steps and this call is not the next
                one it recorded (the agent diverged from its crashed run).

        """
        if not self._record.exhausted:
            result = self._record.serve_call(name, arguments)
            self.served_calls += 1
            return result
        if self._resumed.cut:
            try:
                key = self._recording.peek_key(name, arguments)
            except InputError:  # no canonical form: the live path refuses it
                key = ""
            intent = self._resumed.cut.pop(key, None)
            if intent is not None:
                return self._unknown(name, arguments, intent)
        return await super().call(name, arguments, model_call_id=model_call_id)

    def _unknown(self, name: str, arguments: dict[str, Any], intent: dict[str, str]) -> ToolResult:
        """Record a cut call of a tool that must act once as ``outcome_unknown``, unrun."""
        try:
            admission = self._recording.admit(name, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        key, session = intent["key"], self._resumed.session
        found = self._resumed.reconciled.get(key)
        detail: dict[str, Any] = {"idempotency_key": key, "cut_step": intent["step"]}
        then = (
            f"find out and record it (toolproof sessions reconcile {session} "
            f"{intent['step']} --outcome FILE)"
        )
        if found is not None:  # a person's finding, recorded with the call
            detail["reconciled"] = found
            then = (
                f"reconciled by {found.get('who')} at {found.get('at')} (outcome "
                f"{found.get('outcome_digest')})"
            )
        failure = ToolResult.fail(
            "outcome_unknown",
            f"call {intent['step']} to {name!r} (idempotency key {key}) of session "
            f"{session!r} was cut before its result was recorded and may have acted; its "
            "tool is neither read-only nor idempotent, nor does it honour the key, so it is "
            f"not run again: {then}",
            where="runtime",
            detail=detail,
        )
        observed = Observed(failure, idempotency_key=admission.idempotency_key or None)
        try:
            return self._recording.record(admission, observed).result
        except ToolCallError as unrecorded:
            return ToolResult(ok=False, failure=unrecorded.failure)

    def known_turn(self, source: str, key: bytes) -> RecordedTurn | None:
        """The recorded turn while the record holds unserved steps; then ``None`` (live)."""
        if self._record.exhausted:
            return None
        turn = self._record.serve_turn(source, key)
        self.served_turns += 1
        return turn
