"""Finalize a live session into a run directory; recover one a killed process left.

See :mod:`toolproof.runs.live` for the layout. Finalizing (on SIGTERM/SIGINT or
when stdin closes, for ``serve --record``) turns the live session into an ordinary
run: the calls and model turns become the steps of a spec (``policy = "audit"``: a
client's bad call is a warning, not a broken record), the plan is executed *frozen*
from the recorded results (no tool is called) by the executor, which writes the call steps with the
same recorder that wrote them live and then the ``derive``, ``verify`` and
``finalize`` nodes, and the run directory is committed atomically to
``ROOT/runs/<run_id>`` with its manifest; the live directory is then removed. The
committed call steps must equal the live ones byte for byte: a live trace edited
after it was written is not committed. The result verifies with ``toolproof verify``
and replays with ``toolproof replay``.

The live trace is read once, a line at a time (:func:`~toolproof.runs.livetrace.scan_live`):
what the run is made of is summed up as it goes (the spec's steps, the calls' tool names
and keys) and the events a frozen re-execution serves are indexed by key (8 bytes an
event, :mod:`toolproof.runs.traceindex`), not held; the re-execution reads each back by
its call or step id. The live evidence is read from the session's ``evidence.pack``
(:func:`~toolproof.bundle.pack.read_pack`: every item's digest checked) and from
``evidence/`` files (sessions recorded before the pack). The committed run holds its
own ``evidence.pack`` and ``evidence.idx`` (docs/runs.md, "The evidence layout"): the
live pack's sound part is copied into the run in one write, and the frozen
re-execution, storing the same items in the same order (a tool result's bytes from
its recorded value, a model turn's from the live pack), takes each as it lies instead
of writing it again (what it does not store is cut off); made durable by the run
directory's commit; the
live directory, pack included, is removed only after the run is in place, so a crash
at any point leaves either the live session (recover it again) or the committed run;
a crash between the two leaves both, and the run id the live directory's
``commit.json`` names (written before the commit) makes a later finalize or recovery
take that run instead of committing the segment again (:mod:`toolproof.runs.committed`).

A process killed outright (``kill -9``) leaves the live directory, which has no
manifest and so never verifies. :func:`recover_session` (``toolproof verify
--recover``) keeps the events up to the last complete call block whose evidence
bytes are all in the live session, reports what it dropped (events of an unfinished
block, a torn last line, a torn or damaged pack item and everything after it, steps
whose bytes the pack lost, unreferenced evidence), and finalizes the rest the same
way. A run that cannot be written (a full disk) is a
:class:`~toolproof.errors.RecordingError`; the live session is kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolproof.bundle.pack import PACK_FILE, PackContents
from toolproof.bundle.rundir import CommittedRun, RunDirectoryWriter, recorder_alive
from toolproof.contract.layout import (
    MANIFEST_FILE,
    RUNTIME_FILE,
    TIMINGS_FILE,
    TRACE_FILE,
)
from toolproof.contract.runs import (
    ExecutionRuntime,
    Policy,
    ReasonerSpec,
    Report,
    RunSpec,
    Timings,
)
from toolproof.errors import InputError, RecordingError, VerificationError
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.runs.calls import FrozenCalls, FrozenClock
from toolproof.runs.committed import RECOVERY_FILE, committed_already, write_commit_marker
from toolproof.runs.header import read_header
from toolproof.runs.live import SESSION_FILE, SESSION_TASK, discard_recording
from toolproof.runs.livetrace import LiveEvidence, LiveTrace, live_evidence, scan_live
from toolproof.runs.planner import plan_run
from toolproof.runs.retrieve import default_handlers
from toolproof.runs.run import RecordedRun, long_lived, record_run, step_kinds
from toolproof.runs.seglink import link_live
from toolproof.runs.turns import RecordedTurns, turn_providers
from toolproof.verify.keys import SEGMENT_FILE
from toolproof.verify.verifier import Verification

__all__ = [
    "RECOVERY_FILE",
    "SessionOutcome",
    "finalize_session",
    "is_live_session",
    "recover_session",
]

ANSWER_FILE = "answer.json"
"""The live session file of an agent's answer (``{"answer", "citations"}``), if any."""


@dataclass(frozen=True)
class SessionOutcome:
    """A finalized (or recovered) session.

    Attributes:
        run_id: the committed run's id.
        path: ``<root>/runs/<run_id>``.
        report: the report written with it.
        calls: served calls kept.
        dropped: what recovery dropped, one message each (empty for a clean stop).
        reads: resource reads kept (``resources/read`` served to the client).
        keys: the idempotency keys of the calls kept (a named session's resume finds
            its cut calls by them: :func:`toolproof.runs.resume.prepare_resume`).
        verification: the run's verification, from the checks its recording ran over the
            files it wrote (:meth:`Judged.verification
            <toolproof.verify.verifier.Judged.verification>`; :func:`recover_session`
            only: a resume does not verify the run it just recovered again).

    """

    run_id: str
    path: Path
    report: Report
    calls: int
    dropped: list[str] = field(default_factory=list)
    reads: int = 0
    keys: frozenset[str] = frozenset()
    verification: Verification | None = None


def is_live_session(directory: Path) -> bool:
    """Whether ``directory`` is a live session (a ``session.json``, no ``manifest.json``)."""
    return (directory / SESSION_FILE).is_file() and not (directory / MANIFEST_FILE).exists()


def _started(header: dict[str, Any]) -> tuple[str, float]:
    started_at = str(header.get("started_at", ""))
    try:
        begun = datetime.fromisoformat(started_at)
        seconds = max(0.0, (datetime.now(UTC) - begun).total_seconds())
    except ValueError:
        started_at, seconds = datetime.now(UTC).isoformat(timespec="milliseconds"), 0.0
    return started_at, round(seconds, 6)


async def _commit(
    live: Path,
    root: Path,
    trace: LiveTrace,
    header: dict[str, Any],
    dropped: list[str] | None,
    pack: PackContents | None,
) -> SessionOutcome:
    calls, reads, keys = len(trace.tools), trace.reads, frozenset(trace.keys)
    done = committed_already(live, root)  # a kill after its commit kept the live directory
    if done is not None:
        discard_recording(live)
        run, report, kept = done
        return SessionOutcome(run.name, run, report, calls, kept, reads, keys)
    runtime = ExecutionRuntime.model_validate_json((live / RUNTIME_FILE).read_bytes())
    turns = list(trace.turns.values())
    config = header.get("config")
    task = str(header.get("task", SESSION_TASK))
    if dropped is not None:
        task = f"{task} (recovered after an unclean stop)"
    segment = _segment(live)
    if segment is not None:
        task = f"{task} (segment {segment['index']} of session {segment['session']})"
    reasoner = ReasonerSpec()
    answer_path = live / ANSWER_FILE
    if answer_path.is_file():  # an agent's answer: its quotes become the claim
        answer = json.loads(answer_path.read_bytes())
        params = {**answer, "calls": list(trace.tools)}
        reasoner = ReasonerSpec(name="answer", params=params)
        runtime = ExecutionRuntime.model_validate(
            {
                **runtime.to_json(),
                "reasoner": reasoner_registry().create(reasoner).descriptor().to_json(),
                "id": "",
            }
        )
    if turns:  # an agent's model: a declared source of variation
        runtime = ExecutionRuntime.model_validate(
            {**runtime.to_json(), "providers": turn_providers(turns, runtime.providers), "id": ""}
        )
    spec = RunSpec(
        task=task,
        toolset=Path(config).name if isinstance(config, str) else "toolproof.toml",
        steps=trace.steps,
        policy=Policy.AUDIT,
        reasoner=reasoner,
    )
    try:
        committed, recorded = await _write_run(
            live,
            root,
            spec,
            runtime,
            trace,
            header,
            dropped,
            pack,
            segment,
        )
    except OSError as exc:
        raise RecordingError(
            f"session {live}: cannot write its run under {root}: {exc.strerror or exc} "
            f"({exc.filename or root}); the live session is kept: free space and run "
            "`toolproof verify --recover` on it",
            path=str(exc.filename or root),
        ) from exc
    discard_recording(live)
    outcome = (committed.run_id, committed.path, recorded.report, calls)
    verified = recorded.judged.verification(committed.path, committed.run_id)
    return SessionOutcome(*outcome, list(dropped or []), reads, keys, verified)


def _first_difference(live: Path, replayed: Path, lines: int) -> int | None:
    """The first of the first ``lines`` lines where two traces differ, or ``None``.

    Both files are read a line at a time (not held: a segment's trace is megabytes).
    """
    with live.open("rb") as kept, replayed.open("rb") as written:
        for index in range(lines):
            if kept.readline().rstrip(b"\n") != written.readline().rstrip(b"\n"):
                return index
    return None


def _segment(live: Path) -> dict[str, Any] | None:
    """The live session's ``segment.json`` (a segment of a sealed session), or ``None``."""
    path = live / SEGMENT_FILE
    if not path.is_file():
        return None
    value = json.loads(path.read_bytes())
    return value if isinstance(value, dict) else None


async def _write_run(
    live: Path,
    root: Path,
    spec: RunSpec,
    runtime: ExecutionRuntime,
    trace: LiveTrace,
    header: dict[str, Any],
    dropped: list[str] | None,
    pack: PackContents | None,
    segment: dict[str, Any] | None = None,
) -> tuple[CommittedRun, RecordedRun]:
    recording = trace.recording
    turns = RecordedTurns(recording, live, pack=pack)
    handlers = {**default_handlers(recording=recording), "model": turns}
    plan = plan_run(spec, runtime.toolset, step_kinds=step_kinds(handlers))
    with long_lived(), RunDirectoryWriter(root) as writer:  # the spec and plan too
        # the live pack's sound items become the run's pack as they lie (one write of
        # the copy); the re-execution stores the same items in the same order, so it
        # takes them instead of writing each again, and cuts what it does not store
        adopt = pack.copy_sound(writer.temp / PACK_FILE) if pack and pack.items else ()
        if segment is not None:  # before the checks: a later segment's counts continue
            writer.write_json(SEGMENT_FILE, segment)
        recorded = await record_run(
            writer.temp,
            spec=spec,
            plan=plan,
            runtime=runtime,
            calls=FrozenCalls(recording),
            clock=FrozenClock(recording),
            reasoner=reasoner_registry().create(spec.reasoner),
            handlers=handlers,
            adopt=adopt,
        )
        first = _first_difference(live / TRACE_FILE, writer.temp / TRACE_FILE, trace.events)
        if first is not None:
            raise VerificationError(
                f"session {live}: the frozen re-execution differs from the live trace at event "
                f"{first}; the live session is kept for inspection",
                path=str(live),
                event=first,
            )
        writer.known.update(recorded.known)
        if dropped is not None:
            writer.write_json(
                RECOVERY_FILE,
                {"session": live.name, "kept_calls": len(trace.tools), "dropped": dropped},
            )
        started_at, seconds = _started(header)
        writer.write_json(TIMINGS_FILE, Timings(started_at=started_at, wall_seconds=seconds))
        return writer.commit(lambda run_id: write_commit_marker(live, run_id)), recorded


def _read_live(live: Path) -> tuple[dict[str, Any], LiveTrace, LiveEvidence]:
    """The live session's header, its trace read once (:func:`scan_live`), its evidence.

    Raises:
        InputError: ``live`` is not a live session, or a file of it cannot be read.

    """
    if not is_live_session(live):
        raise InputError(
            f"{live} is not a live session (no {SESSION_FILE}, or it already has a manifest)",
            path=str(live),
        )
    header = read_header(live)  # refused naming session.json and the rule
    try:
        evidence = live_evidence(live)
        trace = scan_live(live, evidence)
    except (OSError, ValueError) as exc:
        raise InputError(f"{live}: cannot read the live session: {exc}", path=str(live)) from exc
    return header, trace, evidence


async def finalize_session(live: Path, root: Path) -> SessionOutcome:
    """Finalize a cleanly stopped live session into ``root/runs/<run_id>``.

    Raises:
        InputError: ``live`` is not a live session.
        VerificationError: the live trace is damaged (use :func:`recover_session`) or its
            frozen re-execution differs from it.
        RecordingError: the run cannot be written (the live session is kept).

    """
    header, trace, evidence = _read_live(live)
    dropped = list(trace.dropped)
    if trace.problem is not None:
        dropped.append(f"trace.jsonl {trace.problem}")
    if dropped:
        raise VerificationError(
            f"session {live}: the live trace is damaged ({dropped[0]}); "
            "run `toolproof verify --recover` on it",
            path=str(live),
        )
    with trace.recording:
        outcome = await _commit(live, root, trace, header, None, evidence.pack)
    return replace(outcome, verification=None)  # a session keeps its segments' outcomes


async def recover_session(live: Path) -> SessionOutcome:
    """Recover the live session a killed server left: keep what is sound, report the rest.

    The run lands in ``<artifact root>/runs/<run_id>`` (the root is two levels above
    ``live``), carries ``recovery.json`` listing what was dropped, and its spec's task
    says it was recovered. A live segment after the first whose link was never written
    (sealed before it could link) is first linked to its sealed predecessor under
    ``ROOT/runs``, by the rule a resume follows (:func:`~toolproof.runs.seglink.link_live`).

    Raises:
        InputError: ``live`` is not a live session, or its server is still running, or
            it is a segment whose predecessor is not sealed under ``ROOT/runs``.
        RecordingError: the run (or the segment's link) cannot be written (the live
            session is kept).

    """
    header, trace, evidence = _read_live(live)
    if header.get("pid") != os.getpid() and recorder_alive(
        header.get("pid"), header.get("process")
    ):
        raise InputError(
            f"{live}: the server recording it (pid {header['pid']}) is still running; "
            "stop it (SIGTERM finalizes the session) instead of recovering",
            path=str(live),
        )
    link_live(live, "recover")  # a segment sealed before it could link: as a resume does
    root = live.parent.parent
    with trace.recording:
        return await _commit(live, root, trace, header, trace.dropped, evidence.pack)
