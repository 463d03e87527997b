"""An agent session's frozen replay: the recording, served through the one replay matcher.

:meth:`FrozenSession.load` verifies a recorded session's run and reads what
``toolproof.replay_session`` serves: tool calls by tool, canonical arguments and
occurrence; model turns by source, match key (:mod:`toolproof.runs.turns`) and
occurrence; resource reads and prompt gets by canonical request, in recorded order
(:class:`~toolproof.runs.matcher.Matcher`). The first divergence refuses with
:class:`~toolproof.errors.ReplayRefused` naming the recorded event index and a unified
diff of recorded vs asked (:meth:`FrozenSession.serve_call`,
:meth:`FrozenSession.serve_turn`, :meth:`FrozenSession.finish`).

:meth:`FrozenSession.load_chain` serves a session sealed into segments
(:mod:`toolproof.runs.segments`) as one: the chain is verified first
(:func:`~toolproof.runs.chain.verify_chain`), then the segments are served in order,
from segment 1 to the head, one loaded at a time: the next one is loaded when the agent
asks for a step the open segment does not hold and every call and model turn of that
segment was served (step numbers go on across segments, so the agent's next step is
then past the segment's last). A refusal names the segment and its run id.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from toolproof.contract.tools import PresentedTools, ToolResult, ToolsetDescriptor, ToolSpec
from toolproof.contract.trace import (
    EvidenceRegistered,
    ModelTurn,
    PromptGot,
    ResourceRead,
    StepFinished,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import InputError, ReplayRefused
from toolproof.identity import canonical_json
from toolproof.runs.admission import admission_number
from toolproof.runs.chain import verify_chain
from toolproof.runs.live import admission_sorted
from toolproof.runs.matcher import Matcher, call_text, diff
from toolproof.runs.normal_form import version_change
from toolproof.runs.recorded import ModelExchange
from toolproof.runs.turns import exchange_key, key_text, stream_evidence
from toolproof.sessions.port import Asked, RecordedTurn
from toolproof.sessions.presented import specs_of
from toolproof.tools.exposure import GATE_EXTENSION
from toolproof.verify.verifier import Verification, verify_run
from toolproof.verify.view import RunView

__all__ = ["FrozenSession"]

CallKey = tuple[str, bytes]
"""A tool call's match key: (tool, canonical arguments)."""
TurnKey = tuple[str, bytes]
"""A model turn's match key: (source, :func:`~toolproof.runs.turns.turn_key`)."""


def _call_shown(key: CallKey) -> str:
    return call_text(*key)


class FrozenSession:
    """A recorded agent session, served frozen (build it with :meth:`load`).

    Attributes:
        calls: the recorded tool results by (tool, canonical arguments), in asked order.
        turns: the recorded model turns by (source, match key), in asked order.
        reads: the recorded resource reads and prompt gets by canonical request.
        answer: the recorded answer (``{"answer", "citations"}``), if any.
        specs: the recorded exposed tools as presented (a run written before runs stored
            them: the names, with open schemas).
        presented: the recorded tools as presented to the framework, or ``None`` (a run
            written before runs stored them).
        turn_details: each recorded turn's ``detail`` (its framework and version), by
            event index.
        descriptor: the recorded Toolset descriptor.
        gated: the recorded tools whose layer chain holds ``approve``.
        refused: the first refusal, kept so a framework that wraps or swallows it
            cannot hide it.
        run_id: the run being served (its directory's name).
        segment: the number of the segment being served (1 and up; 1 for one run).
        segments: how many segments are served (1 for one run).
        steps: the last call step and the last model-turn step (their admission
            numbers) of the segments loaded so far; once :attr:`exhausted`, the
            record's, after which a resumed session numbers its live steps.

    """

    def __init__(
        self,
        calls: Matcher[CallKey, ToolResult],
        turns: Matcher[TurnKey, RecordedTurn],
        reads: Matcher[bytes, dict[str, Any]],
        answer: dict[str, Any] | None,
    ) -> None:
        self.calls = calls
        self.turns = turns
        self.reads = reads
        self.answer = answer
        self.specs: tuple[ToolSpec, ...] = ()
        self.presented: PresentedTools | None = None
        self.turn_details: dict[int, dict[str, Any]] = {}
        self.descriptor: ToolsetDescriptor | None = None
        self.gated: frozenset[str] = frozenset()
        self.refused: ReplayRefused | None = None
        self.run_id = ""
        self.segment = self.segments = 1
        self.steps = (0, 0)
        self._rest: deque[Path] = deque()  # the segments after this one, in order
        self._before = (0, 0)  # calls and turns served by the segments before this one

    @classmethod
    def load(cls, directory: Path, *, verify: bool = True) -> FrozenSession:
        """Verify the run at ``directory`` and read what its frozen replay serves.

        Args:
            directory: the run directory.
            verify: verify it first (``False``: the caller verified it).

        Raises:
            ReplayRefused: the run does not verify (``check="verify"``).

        """
        if verify:
            verification = verify_run(directory)
            if not verification.ok:
                first = verification.failures[0]
                raise ReplayRefused(f"frozen replay refused: {first}", check="verify")
        view = RunView(directory)
        events = view.events or []
        end = next(
            (e.idx for e in events if isinstance(e, StepFinished) and e.step == "derive"),
            len(events),
        )
        called: dict[str, ToolCalled] = {}
        calls: list[tuple[CallKey, int, ToolResult, str]] = []
        turns: list[tuple[TurnKey, int, RecordedTurn, str]] = []
        reads: list[tuple[bytes, int, dict[str, Any], str]] = []
        media: dict[tuple[str, str], str] = {}
        for event in events:
            if isinstance(event, EvidenceRegistered):
                media[(event.step, event.evidence.id)] = event.evidence.media_type
            elif isinstance(event, ToolCalled):
                called[event.call_id] = event
            elif isinstance(event, ToolReturned) and event.call_id in called:
                asked = called[event.call_id]
                key = (asked.call.tool, canonical_json(dict(asked.call.arguments)))
                calls.append((key, asked.idx, event.result, asked.step))
            elif isinstance(event, ModelTurn):
                request = view.evidence.read(event.request)
                response = view.evidence.read(event.response)
                turn_key = (event.source, exchange_key(event.source, request, dict(event.detail)))
                detail = dict(event.detail)
                stream_id = stream_evidence(detail)
                stream = None if stream_id is None else view.evidence.read(stream_id)
                exchange = ModelExchange(  # what a fork records again in its new run
                    event.source,
                    event.model,
                    request,
                    response,
                    event.key,
                    media.get((event.step, event.request), "application/json"),
                    media.get((event.step, event.response), "application/json"),
                    detail,
                    stream,
                )
                turn = RecordedTurn(response, detail, exchange, stream)
                turns.append((turn_key, event.idx, turn, event.step))
            elif isinstance(event, ResourceRead | PromptGot):
                reads.append((_read_key(event), event.idx, dict(event.result), ""))
        answer = None
        if view.spec is not None and view.spec.reasoner.name == "answer":
            answer = dict(view.spec.reasoner.params)
        # repeated identical calls (and turns) are served in the order they were asked:
        # by admission number (the step's), not by trace position (the order answered)
        frozen = cls(
            Matcher(calls, asked_order=admission_sorted, end=end),
            Matcher(turns, asked_order=admission_sorted, end=end),
            Matcher(reads),
            answer,
        )
        if view.runtime is not None:
            toolset = view.runtime.toolset
            hidden = set(toolset.exposure.hidden) if toolset.exposure is not None else set()
            frozen.presented = view.runtime.presented
            frozen.specs = (  # an older run: the names only, the schemas are not known
                specs_of(frozen.presented)
                if frozen.presented is not None
                else tuple(
                    ToolSpec(name=tool.name, input_schema={"type": "object"})
                    for tool in toolset.tools
                    if tool.name not in hidden
                )
            )
            frozen.gated = frozenset(
                tool.name
                for tool in toolset.tools
                if any(layer.name == GATE_EXTENSION for layer in tool.stack)
            )
            frozen.descriptor = toolset
        frozen.turn_details = {index: turn.detail for _, index, turn, _ in turns}
        frozen.run_id = Path(directory).name
        frozen.steps = (_last_step(calls), _last_step(turns))
        return frozen

    @classmethod
    def load_chain(
        cls, head: Path, *, verified: dict[str, Verification] | None = None
    ) -> FrozenSession:
        """Verify the chain ending at ``head`` and open its segment 1 for serving.

        The whole chain is verified first (:func:`~toolproof.runs.chain.verify_chain`:
        every segment verifies, every link holds, every predecessor is under the same
        ``runs/``), before any step is served; only segment 1 is read here, each later
        one when the agent gets to it (memory: one segment's recording). A run without
        ``segment.json`` is a chain of one, served as :meth:`load` serves it.

        ``verified``: segments this process just wrote and verified, by run id (a
        resume's recovered segments: :attr:`~toolproof.runs.resume.Resumed.verified`,
        judged by their recording's own check pass); each is taken as its verification
        instead of :func:`~toolproof.verify.verifier.verify_run` reading it again.

        Raises:
            ReplayRefused: the chain does not hold (``check="verify"``; the message is
                the chain's first problem).

        """
        known = verified or {}

        def verify(directory: Path) -> Verification:
            return known.get(directory.name) or verify_run(directory)

        checked = verify_chain(Path(head), verify=verify)
        if not checked.ok:
            raise ReplayRefused(f"frozen replay refused: {checked.problem}", check="verify")
        directories = [result.directory for result in reversed(checked.segments)]
        frozen = cls.load(directories[0], verify=False)
        frozen.segments = len(directories)
        frozen._rest = deque(directories[1:])
        return frozen

    @property
    def calls_served(self) -> int:
        """Tool calls served, over every segment served so far."""
        return self._before[0] + self.calls.served

    @property
    def turns_served(self) -> int:
        """Model turns served, over every segment served so far."""
        return self._before[1] + self.turns.served

    @property
    def exhausted(self) -> bool:
        """Whether every recorded call and model turn of every segment was served."""
        pending = self.calls.first_pending() or self.turns.first_pending()
        return not self._rest and pending is None

    def _advance(self) -> bool:
        """Open the next segment when this one's calls and turns were all served.

        Returns:
            True when the next segment is now the one served; False when this is the
            last, or a call or turn of it is still unserved (the agent diverged here).

        Raises:
            ReplayRefused: the next segment recorded another Toolset descriptor or other
                presented tools.

        """
        if not self._rest or self.calls.first_pending() or self.turns.first_pending():
            return False
        following = FrozenSession.load(self._rest.popleft(), verify=False)
        if (following.descriptor, following.presented) != (self.descriptor, self.presented):
            raise ReplayRefused(
                f"frozen replay refused: segment {self.segment + 1} (run "
                f"{following.run_id}) recorded another Toolset descriptor (or other tools "
                f"presented) than segment {self.segment}",
                rule="runtime descriptor",
            )
        self._before = (self.calls_served, self.turns_served)
        self.calls, self.turns, self.reads = following.calls, following.turns, following.reads
        self.answer, self.run_id = following.answer, following.run_id
        self.turn_details = following.turn_details
        (call, turn), (next_call, next_turn) = self.steps, following.steps
        self.steps = (max(call, next_call), max(turn, next_turn))
        self.segment += 1
        return True

    def _refuse(self, refused: ReplayRefused) -> ReplayRefused:
        """``refused``, kept as :attr:`refused` when it is the first (concurrent asks go on)."""
        if self.refused is None:
            self.refused = refused
        return refused

    def _refused(self) -> str:
        """The start of a refusal: which segment (and run) refused, for a chain."""
        if self.segments == 1:
            return "frozen replay refused"
        where = f"segment {self.segment} of {self.segments} (run {self.run_id})"
        return f"frozen replay refused in {where}"

    def serve_call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """The recorded result of the next occurrence of ``name(arguments)``.

        Raises:
            ReplayRefused: the call has no canonical JSON form (rule ``arguments``), or
                it was not recorded, or every recorded occurrence was served (rule
                ``call``; naming the recorded event index of the next unserved call,
                with a unified diff of it and the asked one).

        """
        try:
            key = (name, canonical_json(arguments))
        except InputError as exc:
            raise ReplayRefused(
                f"frozen replay refused: the agent called {name!r} with arguments that have "
                f"no canonical JSON form ({exc.message})",
                rule="arguments",
            ) from None
        taken = self.calls.taken(key)
        result = self.calls.take(key)
        while result is None and self._advance():
            taken = self.calls.taken(key)
            result = self.calls.take(key)
        if result is not None:
            return result
        index, expected = self._expected(self.calls, _call_shown)
        what = "an extra call" if key in self.calls else "an unrecorded call"
        refused = ReplayRefused(
            f"{self._refused()} at event {index}: the agent made {what} to {name!r} "
            f"(occurrence {taken + 1}); a live call would be a new run\n"
            f"{diff(expected, _call_shown(key))}",
            event=index,
            rule="call",
        )
        raise self._refuse(refused)

    def serve_turn(
        self,
        source: str,
        key: bytes,
        *,
        open_schemas: bool = False,
        asked: Asked = None,
    ) -> RecordedTurn:
        """The recorded turn of the next occurrence of ``(source, key)``.

        Occurrences count in the order the turns were *asked* when recorded (their
        admission numbers, ``turn-0000000N``), not the order they were answered.

        Raises:
            ReplayRefused: no such turn was recorded, or every recorded one was served
                (naming the recorded event index of the next unserved turn, with a
                unified diff of its match key and the asked one; with ``open_schemas``
                and a run that stores no tools, the agent saw the recorded names with
                open schemas, which the message says; when the recorded turn names its
                framework's version, or an HTTP turn its client, and ``asked`` or the
                installed one differs, both).

        """
        entry = (source, key)
        taken = self.turns.taken(entry)
        turn = self.turns.take(entry)
        while turn is None and self._advance():
            taken = self.turns.taken(entry)
            turn = self.turns.take(entry)
        if turn is not None:
            return turn
        index, expected = self._expected(self.turns, _turn_shown)
        what = "an extra" if entry in self.turns else "an unrecorded"
        hint = version_change(source, self.turn_details.get(index, {}), asked)
        if open_schemas and self.presented is None:
            hint += (
                " (this run stores no tool definitions, being recorded before runs did, and "
                "this replay has no toolset=, so the agent sees the recorded tool names "
                "with open schemas: pass the Toolset, replay_session(..., toolset=...) or "
                "toolproof replay --config toolproof.toml)"
            )
        refused = ReplayRefused(
            f"{self._refused()} at event {index}: the agent made {what} {source} model "
            f"request (occurrence {taken + 1}); a live model turn would be a new run{hint}\n"
            f"{diff(expected, key_text(key))}",
            event=index,
            rule="model turn",
        )
        raise self._refuse(refused)

    def serve_read(self, request: dict[str, Any]) -> dict[str, Any]:
        """The next recorded result of a resource read or prompt get ``request``.

        Raises:
            ReplayRefused: the recording holds no (more) such read (rule ``read``).

        """
        asked = canonical_json(request)
        found = self.reads.take(asked)
        while found is None and self._advance():
            found = self.reads.take(asked)
        if found is None:
            refused = ReplayRefused(
                f"{self._refused()}: the agent asked {request}, which the recording "
                "does not hold; a live read would be a new run",
                rule="read",
            )
            raise self._refuse(refused)
        return found

    def finish(self, answered: dict[str, Any] | None) -> None:
        """After the agent ran: every recorded turn and call was asked, the answer is equal.

        Raises:
            ReplayRefused: the first recorded model request (rule ``missing model
                turn``) or call (rule ``missing call``) the agent never made, or the
                answer differs (rule ``answer``); each naming its event index, with a diff.

        """
        while self._advance():  # the segments left: their first step was never asked
            pass
        first_call = self.calls.first_pending()
        first_turn = self.turns.first_pending()
        if first_turn is not None and (first_call is None or first_turn[0] < first_call[0]):
            index, (source, key) = first_turn
            raise ReplayRefused(
                f"{self._refused()} at event {index}: the agent never made the recorded "
                f"{source} model request\n{diff(key_text(key), '')}",
                event=index,
                rule="missing model turn",
            )
        if first_call is not None:
            index, (tool, raw) = first_call
            raise ReplayRefused(
                f"{self._refused()} at event {index}: the agent never made the recorded "
                f"call to {tool!r}\n{diff(call_text(tool, raw), '')}",
                event=index,
                rule="missing call",
            )
        recorded = (self.answer or {}).get("answer")
        asked = (answered or {}).get("answer")
        if recorded != asked:
            end = self.calls.end
            raise ReplayRefused(
                f"{self._refused()} at event {end}: the answer differs\n"
                f"{diff(str(recorded or ''), str(asked or ''))}",
                event=end,
                rule="answer",
            )

    @staticmethod
    def _expected(matcher: Matcher[Any, Any], shown: Any) -> tuple[int, str]:
        """The next unserved recorded item's event index and text (none: the end, ``""``)."""
        pending = matcher.first_pending()
        if pending is None:
            return matcher.end, ""
        return pending[0], shown(pending[1])


def _last_step(entries: list[tuple[Any, int, Any, str]]) -> int:
    """The highest admission number among recorded entries' steps (0: none numbered)."""
    return max((admission_number(step) or 0 for *_, step in entries), default=0)


def _turn_shown(key: TurnKey) -> str:
    return key_text(key[1])


def _read_key(event: ResourceRead | PromptGot) -> bytes:
    if isinstance(event, ResourceRead):
        return canonical_json({"method": "resources/read", "uri": event.uri})
    asked = {"method": "prompts/get", "name": event.name, "arguments": dict(event.arguments)}
    return canonical_json(asked)
