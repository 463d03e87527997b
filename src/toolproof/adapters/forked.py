"""A fork of a recorded run: served until the first divergent request, then live (docs/agents.md).

``replay_session(run, agent, toolset=..., then="live")`` runs the agent code again with
a :class:`ForkedSession`: every tool call and model turn is first asked of the frozen
replay matcher (:class:`~toolproof.sessions.frozen.FrozenSession`, the one replay
matcher), and while it serves them they are recorded again, as recorded, in a new run
(no tool body run, no model asked: the mechanism a resumed session serves its record
with, :class:`~toolproof.adapters.resumed.ResumedSession`). The matcher's first refusal
(an unrecorded or extra tool call or model request, or a call of a tool whose
descriptor changed since the recording) is the fork: from it on, every call and turn
goes live and is recorded. The new run's ``runtime.json`` names its parent and the
divergence, ``forked_from: {run, event, reason}`` (docs/runs.md); ``toolproof diff
PARENT CHILD`` shows the shared prefix and the fork. Resource reads and prompt gets go
live, as a resumed session's do.
"""

from __future__ import annotations

import re
from typing import Any

from toolproof.adapters.session import Session
from toolproof.bundle.rundir import write_file
from toolproof.contract.forks import ForkedFrom
from toolproof.contract.layout import RUNTIME_FILE
from toolproof.contract.runs import ExecutionRuntime
from toolproof.contract.tools import ToolResult, ToolsetDescriptor
from toolproof.errors import ReplayRefused, ToolCallError
from toolproof.evidence.grounding import Grounding
from toolproof.identity import canonical_json
from toolproof.runs.segments import SegmentedRecording
from toolproof.sessions.frozen import FrozenSession
from toolproof.sessions.port import Asked, RecordedTurn
from toolproof.tools.observe import Observed
from toolproof.tools.toolset import Toolset

__all__ = ["NO_DIVERGENCE", "ForkedSession", "changed_tools"]

_REFUSED = re.compile(
    r"^frozen replay refused (in segment \d+ of \d+ \(run [^)]*\) )?(at event \d+: )?"
)
"""The start of a matcher's refusal that ``forked_from`` leaves out (it has ``run`` and
``event``; a chain's names the segment, whose run ``forked_from.run`` is)."""

NO_DIVERGENCE = "no divergence: the agent asked only what the recording holds"
"""``forked_from.reason`` of a fork whose agent never diverged (its ``event`` is null)."""


def changed_tools(recorded: ToolsetDescriptor | None, current: Toolset) -> frozenset[str]:
    """The tools of ``current`` whose descriptor differs from the recorded one (or is new)."""
    if recorded is None:
        return frozenset()
    before = {tool.name: tool for tool in recorded.tools}
    return frozenset(
        tool.name for tool in current.descriptor().tools if before.get(tool.name) != tool
    )


class ForkedSession(Session):
    """A live session that serves the recording until the first divergence (see the module).

    Attributes:
        parent: the run served (of a chain: the segment being served, so the segment
            the agent diverged in, or the head when it never did).
        fork: ``None`` until the first divergence; then ``{"event", "reason"}``: the
            recorded event index the matcher refused at and its refusal's first line.
        served_calls: tool calls served from the recording (and recorded again).
        served_turns: model turns served from the recording (and recorded again).

    """

    def __init__(
        self,
        toolset: Toolset,
        live: SegmentedRecording,
        record: FrozenSession,
        *,
        changed: frozenset[str] = frozenset(),
        grounding: Grounding | None = None,
    ) -> None:
        super().__init__(toolset, live, None, grounding=grounding)
        self._record, self._recording, self._changed = record, live, changed
        self.parent = record.run_id
        self.fork: dict[str, Any] | None = None
        self.served_calls = 0
        self.served_turns = 0

    def _diverge(self, refused: ReplayRefused) -> None:
        """Remember the first refusal: from it on every call and turn is live."""
        if self.fork is None:
            reason = _REFUSED.sub("", refused.message.splitlines()[0])
            self.fork = {"event": refused.fields.get("event"), "reason": reason}
            self.parent = self._record.run_id  # of a chain: the segment that refused

    async def call(
        self, name: str, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """Serve the call from the recording (and record it again) until the fork; then live."""
        if self.fork is None and name in self._changed:
            pending = self._record.calls.first_pending()
            index = self._record.calls.end if pending is None else pending[0]
            self._diverge(
                ReplayRefused(
                    f"frozen replay refused at event {index}: tool {name!r} changed since "
                    "the recording (its descriptor differs)",
                    event=index,
                    rule="runtime descriptor",
                )
            )
        if self.fork is None:
            try:
                result = self._record.serve_call(name, arguments)
            except ReplayRefused as refused:
                self._diverge(refused)
            else:
                self.served_calls += 1
                return self._again(name, arguments, result, model_call_id)
        return await super().call(name, arguments, model_call_id=model_call_id)

    def _again(
        self, name: str, arguments: dict[str, Any], result: ToolResult, model_call_id: str | None
    ) -> ToolResult:
        """Record a served call in the new run, as recorded; no tool body runs."""
        try:
            admission = self._recording.admit(name, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        origin = {"model_call_id": model_call_id} if model_call_id else None
        try:
            return self._recording.record(admission, Observed(result, origin=origin)).result
        except ToolCallError as unrecorded:
            return ToolResult(ok=False, failure=unrecorded.failure)

    def known_turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn | None:
        """The recorded turn (recorded again in the new run) until the fork; then ``None``."""
        if self.fork is not None:
            return None
        try:
            turn = self._record.serve_turn(source, key, asked=asked)
        except ReplayRefused as refused:
            self._diverge(refused)
            return None
        assert turn.exchange is not None  # a frozen session's turns carry it
        self._recording.record_turn(turn.exchange, self._recording.admit_turn(source))
        self.served_turns += 1
        return turn

    def settle(self) -> ForkedFrom:
        """After the agent ran: the fork (a missing step or another answer is one too)."""
        if self.fork is None:
            try:
                self._record.finish(self.answered)
            except ReplayRefused as refused:
                self._diverge(refused)
        if self.fork is None:
            self.parent = self._record.run_id  # every segment served: the head
        fork = self.fork or {"event": None, "reason": NO_DIVERGENCE}
        forked = ForkedFrom(run=self.parent, event=fork["event"], reason=fork["reason"])
        path = self._recording.current.directory / RUNTIME_FILE
        runtime = ExecutionRuntime.model_validate_json(path.read_bytes()).to_json()
        runtime.pop("id", None)
        runtime["forked_from"] = forked.to_json()
        fresh = path.with_name(f"{RUNTIME_FILE}.fork")  # written whole, then put in place
        write_file(fresh, canonical_json(ExecutionRuntime.model_validate(runtime).to_json()))
        fresh.replace(path)
        return forked
