"""The one resume path of a named session: the record served, then live (docs/durability.md).

``record_session(..., session_id="nightly-42", resume=True)`` and ``toolproof serve
--record ROOT --session-id nightly-42 --resume`` continue a session a crash left the
same way: :func:`resume_recording` recovers it
(:func:`~toolproof.runs.resume.prepare_resume`), verifies the chain it ends and opens
the session's next segment; :class:`Resumption` then decides each asked call and model
turn:

* while the record holds unserved steps, it is served from the record through the
  frozen replay matcher (:class:`~toolproof.sessions.frozen.FrozenSession`): in order,
  no tool body run, no model asked, a diverging agent refused as frozen replay refuses
  it (:class:`~toolproof.errors.ReplayRefused`). Each served call's occurrence is
  counted into the session's keys as it is served, so the record is read once;
* once every recorded step was served, the live segment numbers its steps after the
  record's last and the step goes live, with the key it would have had;
* a *cut* call (its intent logged, its result never recorded) of a tool that declares
  none of read-only, idempotent or ``idempotency = "key"`` is not run: it fails
  ``outcome_unknown``, recorded in the new segment, naming the call and its key (and a
  person's reconciliation when ``toolproof sessions reconcile`` recorded one). A cut
  call of any other tool runs again live, with its key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolproof.contract.tools import PresentedTools, ToolResult
from toolproof.errors import InputError, ToolCallError
from toolproof.identity import canonical_json
from toolproof.runs.live import SESSION_TASK
from toolproof.runs.resume import Resumed, prepare_resume
from toolproof.runs.segments import DEFAULT_SEGMENT_CALLS, SegmentedRecording
from toolproof.sessions.frozen import FrozenSession
from toolproof.sessions.port import Asked, RecordedTurn
from toolproof.tools.observe import Observed
from toolproof.tools.toolset import Toolset

__all__ = ["Resumption", "resume_recording"]


class Resumption:
    """What a resumed session answers before (and instead of) a live step (see the module).

    Args:
        record: the recorded chain, served frozen (:meth:`FrozenSession.load_chain`).
        resumed: where the session resumes (:func:`~toolproof.runs.resume.prepare_resume`).
        recording: the session's live recording, opened on the next segment.

    Attributes:
        resumed: ``resumed``.
        served_calls: tool calls served from the record.
        served_turns: model turns served from the record.

    """

    def __init__(
        self, record: FrozenSession, resumed: Resumed, recording: SegmentedRecording
    ) -> None:
        self._record, self.resumed, self._recording = record, resumed, recording
        self._live = False
        self.served_calls = 0
        self.served_turns = 0

    @property
    def run_ids(self) -> list[str]:
        """The recorded chain's run ids, segment 1 first (the live segments come after)."""
        return list(self.resumed.run_ids)

    def call(self, name: str, arguments: Any) -> ToolResult | None:
        """The answer to a call that does not run live, or ``None`` (call it live).

        Returns:
            The recorded result while the record holds unserved steps; the recorded
            ``outcome_unknown`` failure of a cut call that must act once; else ``None``.

        Raises:
            ReplayRefused: the record holds unserved steps and this call is not the next
                one it recorded (the agent diverged from its crashed run).

        """
        if not self._record.exhausted:
            result = self._record.serve_call(name, arguments)  # refused unless canonical
            self.resumed.keys.count(name, canonical_json(arguments))
            self.served_calls += 1
            return result
        self._go_live()
        if not self.resumed.cut:
            return None
        try:
            key = self._recording.peek_key(name, arguments)
        except InputError:  # no canonical form: the live path refuses it
            return None
        intent = self.resumed.cut.pop(key, None)
        return None if intent is None else self._unknown(name, arguments, intent)

    def turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn | None:
        """The recorded model turn while the record holds unserved steps; then ``None`` (live).

        ``asked``: the asked request's client, named by a refusal (:data:`Asked`).

        Raises:
            ReplayRefused: the request matches no unserved recorded turn.

        """
        if self._record.exhausted:
            self._go_live()
            return None
        turn = self._record.serve_turn(source, key, asked=asked)
        self.served_turns += 1
        return turn

    def _go_live(self) -> None:
        """Once: number the live steps after the record's last (every segment was served)."""
        if not self._live:
            self._live = True
            self._recording.resume_after(*self._record.steps)

    def _unknown(self, name: str, arguments: Any, intent: dict[str, str]) -> ToolResult:
        """Record a cut call of a tool that must act once as ``outcome_unknown``, unrun."""
        try:
            admission = self._recording.admit(name, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        key, session = intent["key"], self.resumed.session
        found = self.resumed.reconciled.get(key)
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


async def resume_recording(
    root: Path,
    session_id: str,
    toolset: Toolset,
    *,
    task: str = SESSION_TASK,
    segment_calls: int = DEFAULT_SEGMENT_CALLS,
    presented: PresentedTools | None = None,
) -> tuple[SegmentedRecording, Resumption]:
    """Recover the crashed session ``session_id`` and open its next segment.

    Args:
        root: the artifact root.
        session_id: the session's name.
        toolset: the Toolset the session recorded (its descriptor is checked).
        task: the new segment's task.
        segment_calls: steps per segment (0: one run).
        presented: the tools as presented to an agent's framework, stored in the runtime.

    Returns:
        The live recording (the session's next segment, linked to the recovered one)
        and the :class:`Resumption` that answers first.

    Raises:
        InputError: the session cannot resume (:func:`~toolproof.runs.resume.prepare_resume`).
        RecordingError: a recovered segment cannot be written.
        ReplayRefused: the recorded chain does not verify.

    """
    resumed = await prepare_resume(Path(root), session_id, toolset)
    # verified before the new segment opens (the recovered runs by their recovery)
    record = FrozenSession.load_chain(resumed.head, verified=resumed.verified)
    recording = SegmentedRecording(
        Path(root),
        toolset,
        task=task,
        segment_calls=segment_calls,
        presented=presented,
        name=session_id,
        resumed=resumed,
    )
    return recording, Resumption(record, resumed, recording)
