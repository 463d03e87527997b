"""A live session sealed into consecutive segments, each a run linked to its predecessor.

A :class:`SegmentedRecording` is the recorder of ``record_session`` and ``serve
--record`` (DESIGN.md section 15: "a long-lived recorder may seal consecutive
segments"). It writes one :class:`~toolproof.runs.live.LiveRecording` at a time; once
the open segment holds ``segment_calls`` steps (tool calls, model turns, resource reads
and prompt gets), the next step opens the next segment, ``ROOT/sessions/<session>.<k>``,
and the full one is *sealed*: closed, then finalized into an ordinary run
(:func:`~toolproof.runs.finalize.finalize_session`) while recording goes on.

* Nothing is lost or reordered: a call or model turn is numbered when it is admitted
  (:meth:`LiveRecording.admit`) and recorded in the segment that admitted it, even when
  it is answered after the next segment opened; a full segment is sealed once every
  step it admitted is recorded or abandoned (a call cancelled before its answer). Step
  numbers continue across segments (segment 2 starts where segment 1's admissions
  ended); reads and prompt gets are numbered per segment.
* Segments are sealed one at a time, in order: sealing segment *k* waits for segment
  *k-1*'s run, writes the link into segment *k*'s ``segment.json``, then finalizes it
  in the recording's one worker thread, so the event loop is blocked only
  by opening a segment and closing the full one (a few file operations and one
  fsync), never by a finalize; peak memory is the recording's plus one segment's
  finalize. A session that records faster than it seals is slowed (:meth:`room`,
  awaited before each call by the session and the server) while two full segments
  wait, so the work left at the end stays bounded.
* Each run of a sealed session carries ``segment.json`` (listed in its manifest, so
  covered by its run id): ``{"session": <first live directory's name>, "index": k,
  "previous": {"run_id", "files_digest"} | null}`` (``files_digest``: the
  predecessor's manifest ``files_digest``, which covers every byte of it), and its
  spec's task ends ``(segment k of session <session>)``. :mod:`toolproof.runs.chain`
  checks the links. A session that never fills its first segment is one run exactly
  as before: no ``segment.json``.

A segment that cannot be sealed (a full disk) keeps its live directory, and every later
segment's, for ``toolproof verify --recover``; the error is raised when the session ends
(:meth:`SegmentedRecording.finish`). A segment recovered that way keeps its session and
index but, when its predecessor was never sealed, no link (``previous`` is ``null``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import write_file
from toolproof.contract.bounds import DEFAULT_SEGMENT_CALLS
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.layout import MANIFEST_FILE
from toolproof.contract.runs import Manifest
from toolproof.contract.tools import PresentedTools
from toolproof.errors import InputError, RecordingError
from toolproof.identity import canonical_json
from toolproof.runs.admission import Admission, unrecordable
from toolproof.runs.finalize import SessionOutcome, finalize_session
from toolproof.runs.live import (
    SESSION_TASK,
    LiveRecording,
    discard_recording,
    open_recording,
)
from toolproof.runs.recorder import CallRecord, Durability, ModelExchange
from toolproof.runs.resume import RECONCILED_DIR, Resumed, write_intent
from toolproof.tools.idempotency import repeatable
from toolproof.tools.observe import Observed
from toolproof.tools.toolset import Toolset
from toolproof.verify.keys import SEGMENT_FILE

__all__ = ["DEFAULT_SEGMENT_CALLS", "SegmentedRecording"]


def _finalize_now(live: Path, root: Path) -> SessionOutcome:
    """Finalize ``live`` on this (worker) thread's own event loop."""
    return asyncio.run(finalize_session(live, root))


def _recorded(live: LiveRecording) -> int:
    """Steps recorded in one segment."""
    return live.calls + live.turns + live.reads + live.prompts


def _link(outcome: SessionOutcome) -> dict[str, str]:
    """``{"run_id", "files_digest"}`` of a committed segment's run."""
    manifest = Manifest.model_validate_json((outcome.path / MANIFEST_FILE).read_bytes())
    return {"run_id": outcome.run_id, "files_digest": manifest.files_digest}


class SegmentedRecording:
    """The live recording of a session, sealed into a run every ``segment_calls`` steps.

    Same surface as :class:`~toolproof.runs.live.LiveRecording` (:meth:`admit`,
    :meth:`record`, :meth:`admit_turn`, :meth:`record_turn`, :meth:`record_read`,
    :meth:`record_prompt`), plus :meth:`abandon` (an admitted call that will never be
    recorded) and :meth:`finish` (seal the rest, return every segment's run). See the
    module docstring. ``presented``: an agent session's tools as presented to its
    framework, stored in every segment's runtime.

    Attributes:
        root: the artifact root.
        segment_calls: steps per segment; ``0`` never seals before :meth:`finish`.
        session: the session's name (its first live directory's).
        index: the open segment's number (1 and up).
        current: the open segment.
        outcomes: the sealed segments' runs, in order (without their ``keys``).

    """

    def __init__(
        self,
        root: Path,
        toolset: Toolset,
        *,
        task: str = SESSION_TASK,
        segment_calls: int = DEFAULT_SEGMENT_CALLS,
        durability: Durability = Durability.GROUP,
        presented: PresentedTools | None = None,
        name: str = "",
        resumed: Resumed | None = None,
    ) -> None:
        if isinstance(segment_calls, bool) or not isinstance(segment_calls, int):
            raise InputError(
                f"segment_calls {segment_calls!r}: expected a whole number of steps (0: one run)"
            )
        if segment_calls < 0:
            raise InputError(
                f"segment_calls {segment_calls}: expected 0 (one run) or a positive number "
                "of steps per segment"
            )
        self.root = Path(root)
        self.segment_calls = segment_calls
        self._toolset, self._task, self._durability = toolset, task, durability
        self._presented = presented  # every segment's runtime holds it: each replays alone
        self.index = 1 if resumed is None else resumed.index + 1
        first = name if self.index == 1 else f"{name}.{self.index}"
        self.current = open_recording(
            self.root,
            toolset,
            task=task,
            durability=durability,
            presented=presented,
            name=first,
            session_id=name,
        )
        self.session = name or self.current.directory.name
        # a named session logs the intent of each call that must act once (runs/resume.py)
        self._once = frozenset(toolset.names()) - set(repeatable(t.spec for t in toolset))
        self._intents = bool(name)
        self.outcomes: list[SessionOutcome] = []
        self._indexes: dict[Path, int] = {self.current.directory: self.index}
        self._base = 0  # steps admitted before the open segment (calls and turns)
        if resumed is not None:  # go on where the recorded chain ends (resume_after)
            live = self.current
            live.keys = resumed.keys
            self._write_segment(live, self.index, resumed.link)
            for intent in resumed.cut.values():  # still cut if this one crashes too
                write_intent(live.directory, intent["step"], intent["tool"], intent["key"])
            for found in resumed.reconciled.values():  # and still reconciled
                (live.directory / RECONCILED_DIR).mkdir(exist_ok=True)
                path = live.directory / RECONCILED_DIR / f"{found['step']}.json"
                write_file(path, canonical_json(found))
        self._pending: dict[str, LiveRecording] = {}  # admitted, unrecorded: step -> segment
        self._draining: list[LiveRecording] = []
        self._last_seal: asyncio.Future[SessionOutcome] | None = None
        self._unsealed: list[asyncio.Future[SessionOutcome]] = []  # scheduled, not done
        # one worker thread for every seal: one at a time, in one malloc arena
        self._sealer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolproof-seal")
        self._recorded = 0

    # --- what the session and the server read ------------------------------------------

    @property
    def directory(self) -> Path:
        """The open segment's live directory."""
        return self.current.directory

    @property
    def calls(self) -> int:
        """Steps recorded in the whole session so far (calls, turns, reads, prompts)."""
        return self._recorded

    @property
    def run_ids(self) -> list[str]:
        """The sealed segments' run ids, in order."""
        return [outcome.run_id for outcome in self.outcomes]

    # --- the recording surface ---------------------------------------------------------

    def admit(self, tool: str, arguments: Any) -> Admission:
        """:meth:`LiveRecording.admit` in the open segment (opening the next one if full)."""
        live = self._open()
        admission = live.admit(tool, arguments)
        self._pending[admission.step] = live
        if self._intents and tool in self._once:
            try:  # on disk before the body runs: a crash now leaves the call cut, not lost
                write_intent(live.directory, admission.step, tool, admission.idempotency_key)
            except OSError as exc:
                self.abandon(admission)
                raise unrecordable(tool, f"its intent cannot be written ({exc})") from exc
        return admission

    def resume_after(self, admitted: int, turns: int) -> None:
        """Number the next steps after a resumed session's record, before the first live one.

        Args:
            admitted: the last call step the record holds (the next call is ``admitted + 1``).
            turns: the last model-turn step it holds.

        """
        live = self.current
        live.admitted, live.turns_admitted = admitted, turns
        self._base = admitted + turns

    def peek_key(self, tool: str, arguments: Any) -> str:
        """The idempotency key the next call of ``tool(arguments)`` will get (none counted)."""
        return self.current.keys.peek(tool, canonical_json(arguments))

    def record(self, admission: Admission, observed: Observed) -> CallRecord:
        """:meth:`LiveRecording.record` in the segment that admitted the call."""
        live = self._pending.pop(admission.step, self.current)
        try:
            recorded = live.record(admission, observed)
            self._recorded += 1
            return recorded
        finally:
            self._settle(live)

    def abandon(self, admission: Admission) -> None:
        """Forget an admitted call that will not be recorded (cancelled before its answer)."""
        live = self._pending.pop(admission.step, None)
        if live is not None:
            self._settle(live)

    def admit_turn(self, source: str) -> str:
        """:meth:`LiveRecording.admit_turn` in the open segment (opening the next if full)."""
        live = self._open()
        step = live.admit_turn(source)
        self._pending[step] = live
        return step

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """:meth:`LiveRecording.record_turn` in the segment that admitted the turn."""
        live = self._pending.pop(step, None) if step else None
        live = live or (self._open() if not step else self.current)
        try:
            recorded = live.record_turn(turn, step)
            self._recorded += 1
            return recorded
        finally:
            self._settle(live)

    def record_read(self, uri: str, result: dict[str, Any]) -> list[EvidenceRecord]:
        """:meth:`LiveRecording.record_read` in the open segment (opening the next if full)."""
        records = self._open().record_read(uri, result)
        self._recorded += 1
        return records

    def record_prompt(
        self, name: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> list[EvidenceRecord]:
        """:meth:`LiveRecording.record_prompt` in the open segment (opening the next if full)."""
        records = self._open().record_prompt(name, arguments, result)
        self._recorded += 1
        return records

    # --- sealing -----------------------------------------------------------------------

    def _steps(self, live: LiveRecording) -> int:
        return live.admitted + live.turns_admitted - self._base + live.reads + live.prompts

    def _open(self) -> LiveRecording:
        """The open segment; when it is full, open the next and start draining the full one."""
        old = self.current
        if not self.segment_calls or old.closed or old.broken is not None:
            return old
        if self._steps(old) < self.segment_calls:
            return old
        if self.index == 1:
            self._write_segment(old, 1, None)
        self.index += 1
        new = open_recording(
            self.root,
            self._toolset,
            task=self._task,
            durability=self._durability,
            presented=self._presented,
            name=f"{self.session}.{self.index}",
            session_id=self.session,  # the runtime names the session, as its keys do
        )
        new.admitted, new.turns_admitted = old.admitted, old.turns_admitted
        new.keys = old.keys  # one session: its calls' keys name it, occurrences go on counting
        self._base = old.admitted + old.turns_admitted
        self._indexes[new.directory] = self.index
        self._write_segment(new, self.index, None)
        self.current = new
        self._draining.append(old)
        self._settle(old)
        return new

    def _write_segment(
        self, live: LiveRecording, index: int, previous: dict[str, str] | None
    ) -> None:
        value = {"session": self.session, "index": index, "previous": previous}
        staged = live.directory / f"{SEGMENT_FILE}.new"
        staged.unlink(missing_ok=True)
        write_file(staged, json.dumps(value, sort_keys=True).encode("utf-8"))
        os.replace(staged, live.directory / SEGMENT_FILE)  # atomic: old link or new

    def _settle(self, live: LiveRecording) -> None:
        """Seal a draining segment once nothing it admitted is still unrecorded."""
        if live not in self._draining or any(v is live for v in self._pending.values()):
            return
        self._draining.remove(live)
        self._schedule(live)

    def _schedule(self, live: LiveRecording) -> None:
        error: BaseException | None = None
        try:
            live.close()
        except Exception as exc:  # a RecordingError: kept live, raised at finish
            error = exc
        seal = self._seal(live, self._indexes[live.directory], self._last_seal, error)
        self._last_seal = asyncio.ensure_future(seal)
        self._unsealed.append(self._last_seal)
        self._last_seal.add_done_callback(self._unsealed.remove)

    async def room(self) -> None:
        """Wait, before a call is admitted, while more than one full segment awaits its seal.

        Back-pressure: a session that records faster than its segments are finalized
        is slowed to the sealing rate, so the work left when it ends (and the live
        directories on disk) stays at most two segments. The event loop is not
        blocked: only the caller waits.
        """
        while len(self._unsealed) > 1:
            await asyncio.wait({self._unsealed[0]})

    async def _seal(
        self,
        live: LiveRecording,
        index: int,
        previous: asyncio.Future[SessionOutcome] | None,
        error: BaseException | None,
    ) -> SessionOutcome:
        before = await previous if previous is not None else None
        if error is not None:
            raise error
        loop = asyncio.get_running_loop()
        if before is not None:
            link = await loop.run_in_executor(self._sealer, _link, before)
            self._write_segment(live, index, link)
        outcome = await loop.run_in_executor(self._sealer, _finalize_now, live.directory, self.root)
        # a sealed segment's keys are on disk (a resume reads them from the runs it
        # recovers); kept here they cost about 150 bytes a call for the whole session
        self.outcomes.append(dataclasses.replace(outcome, keys=frozenset()))
        return outcome

    async def finish(self) -> list[SessionOutcome]:
        """Close the session: seal every segment left, in order; return every segment's run.

        A segment opened but never written to (the step that opened it was refused) is
        removed instead.

        Returns:
            The :class:`SessionOutcome` of every segment, in order (one for a session
            that never filled its first segment).

        Raises:
            RecordingError: a segment or its run cannot be written (it and every later
                segment are kept live for ``toolproof verify --recover``).
            VerificationError: a segment's live trace is damaged.

        """
        for live in list(self._draining):
            self._draining.remove(live)
            self._schedule(live)
        current = self.current
        if self.index > 1 and _recorded(current) == 0:
            with contextlib.suppress(RecordingError):
                current.close()
            discard_recording(current.directory)
        else:
            self._schedule(current)
        try:
            if self._last_seal is not None:
                await self._last_seal
        finally:
            self._sealer.shutdown(wait=False)
        return list(self.outcomes)

    async def abort(self) -> None:
        """Stop after an error: seal the full segments, keep the open one live (or drop it).

        The open segment is closed and kept for ``toolproof verify --recover`` (removed
        when nothing was recorded in it); errors of the seals are not raised (the
        caller's error is the one that matters).
        """
        for live in list(self._draining):
            self._draining.remove(live)
            self._schedule(live)
        current = self.current
        try:
            current.close()
        finally:
            if _recorded(current) == 0:
                discard_recording(current.directory)
            if self._last_seal is not None:
                with contextlib.suppress(Exception):
                    await self._last_seal
            self._sealer.shutdown(wait=False)
