"""Named sessions that resume after a crash: the intent log, and what a resume starts from.

A session recorded under a name (``record_session(..., session_id="nightly-42")``) lives
in ``ROOT/sessions/nightly-42`` (its later segments in ``nightly-42.2``...). Before the
body of a call of a tool that declares none of read-only, idempotent or
``idempotency = "key"`` runs, the recorder appends the call's **intent** to the open
segment's ``intents.jsonl`` and fsyncs it (``{"step", "tool", "key"}``, one a line): a
call whose intent is on disk but whose block is not in the trace was *cut*, and may
have acted.

After a crash (the process SIGKILLed, or power lost once the intent and the trace
lines it wrote reached the disk: group commit, docs/runs.md), :func:`prepare_resume`
recovers the session's one live directory into a run (``toolproof verify --recover``'s
:func:`~toolproof.runs.finalize.recover_session`, its ``segment.json`` written first so
the run is a segment of the session), checks the chain it ends, and returns a
:class:`Resumed`: where the next segment links to, the cut calls (found by the keys the
recovered segments kept: the only segments an intent's call can be recorded in), and the
session's keys. It reads no recorded segment's trace: the resumed session counts step
numbers and key occurrences as it serves the recorded steps, in its one pass over the
record. The resumed session serves the agent every recorded call and model turn from
the chain, in order, then records live in that next segment; a cut call asked again
fails ``outcome_unknown`` (:mod:`toolproof.sessions.resuming`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import recorder_alive
from toolproof.contract.layout import RUNTIME_FILE, TIMINGS_FILE
from toolproof.contract.runs import ExecutionRuntime, Timings
from toolproof.errors import InputError
from toolproof.identity import canonical_json
from toolproof.runs.chain import check_link
from toolproof.runs.finalize import recover_session
from toolproof.runs.live import SESSION_FILE, SESSIONS_DIR
from toolproof.runs.seglink import json_object, link_live, link_of, write_segment
from toolproof.tools.idempotency import SessionKeys
from toolproof.tools.toolset import Toolset
from toolproof.verify.keys import SEGMENT_FILE
from toolproof.verify.verifier import Verification

__all__ = [
    "INTENTS_FILE",
    "RECONCILED_DIR",
    "SESSION_ID",
    "Resumed",
    "check_session_id",
    "check_session_start",
    "finished_session",
    "json_object",
    "live_segments",
    "prepare_resume",
    "read_intents",
    "read_reconciled",
    "write_intent",
]

RECONCILED_DIR = "reconciled"
"""Where a live directory keeps a person's reconciliations, one ``<step>.json`` per cut
call (:func:`toolproof.runs.unfinished.reconcile`)."""

INTENTS_FILE = "intents.jsonl"
"""A named session's intent log, in each live segment's directory (see the module)."""

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
"""What a session id may be: an ASCII letter or digit, then those, ``_`` and ``-``."""


def check_session_id(session_id: str) -> str:
    """``session_id`` when it is a valid name (:data:`SESSION_ID`).

    Raises:
        InputError: it is not.

    """
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise InputError(
            f"session_id {session_id!r}: not a session name (rule: a letter or digit, then "
            "up to 99 letters, digits, '_' or '-')"
        )
    return session_id


REUSED_RULE = "a session id names one session: its keys would repeat; pick a new id"
"""Why a finished session's id is refused for a new session (:func:`check_session_start`)."""


def finished_session(root: Path, session_id: str) -> tuple[str, str] | None:
    """The last run of the session ``session_id`` committed under ``root/runs``, or ``None``.

    A run is the session's when its runtime names it (``runtime.json``'s ``session``: the
    id its calls' keys name); of several (the segments of a sealed session), the one with
    the highest ``segment.json`` index (1 without one) is the last.

    Returns:
        ``(run_id, ended)``: the run's directory name and when it ended (ISO 8601 UTC, from
        its ``timings.json``: start plus wall-clock seconds; ``""`` when unreadable).

    """
    needle = canonical_json({"session": session_id})[1:-1]  # runtime.json is canonical
    found: list[tuple[int, str, str]] = []
    for run in (Path(root) / "runs").glob("run_*"):
        try:
            data = (run / RUNTIME_FILE).read_bytes()
        except OSError:
            continue
        if needle not in data or json_object(run / RUNTIME_FILE).get("session") != session_id:
            continue
        index = json_object(run / SEGMENT_FILE).get("index", 1)
        ended = ""
        try:
            timings = Timings.model_validate_json((run / TIMINGS_FILE).read_bytes())
            begun = datetime.fromisoformat(timings.started_at)
            end = begun + timedelta(seconds=timings.wall_seconds)
            ended = end.isoformat(timespec="milliseconds")
        except (OSError, ValueError):
            pass
        found.append((index if isinstance(index, int) else 1, ended, run.name))
    if not found:
        return None
    _, ended, run_id = max(found)
    return run_id, ended


def check_session_start(root: Path, session_id: str, resume: bool, flag: str) -> None:
    """Refuse to start (or resume) the session ``session_id`` when its id cannot hold.

    Checked before anything runs (``record_session`` and ``serve --record --session-id``).

    Args:
        root: the artifact root.
        session_id: the session's name (valid: :func:`check_session_id`).
        resume: whether the caller resumes it.
        flag: how the caller asks to resume (``resume=True``, ``--resume``), for the message.

    Raises:
        InputError: the session's recorder still runs in another process (a second
            recorder of it, new or resuming), a new session under the id of an unfinished
            one (resume it), or of a
            finished one (its keys would repeat: a keyed service would take the new calls
            for the old ones and not act), or a resume of a finished session (nothing to
            resume). The message names the session, its last run and when it ended.

    """
    lives = live_segments(root, session_id)
    if lives:
        header = json_object(lives[-1] / SESSION_FILE)
        pid = header.get("pid")
        if pid != os.getpid() and recorder_alive(pid, header.get("process")):
            raise InputError(
                f"session {session_id!r} is running (pid {pid}): stop that process first "
                "(rule: one process records a session at a time)"
            )
        if not resume:
            raise InputError(f"session {session_id!r} is unfinished: resume it ({flag})")
        return
    finished = finished_session(root, session_id)
    if finished is None:
        return
    run_id, ended = finished
    when = f"session {session_id!r} finished in run {run_id}" + (
        f" (ended {ended})" if ended else ""
    )
    if resume:
        raise InputError(f"{when}: nothing to resume (rule: {REUSED_RULE})")
    raise InputError(
        f"{when}; a new session under its id is refused: a keyed service would take its "
        f"calls for the finished session's and not act (rule: {REUSED_RULE})"
    )


def write_intent(directory: Path, step: str, tool: str, key: str) -> None:
    """Append one call's intent to ``directory``'s intent log and fsync it (before its body).

    Raises:
        OSError: it cannot be written (the call must then not run).

    """
    line = canonical_json({"key": key, "step": step, "tool": tool}) + b"\n"
    fd = os.open(directory / INTENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_intents(directory: Path) -> list[dict[str, str]]:
    """The intents in ``directory``'s log, in order; a torn last line is dropped."""
    try:
        data = (directory / INTENTS_FILE).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.split(b"\n"):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # torn, or not the recorder's
            continue
        if isinstance(value, dict) and {"key", "step", "tool"} <= value.keys():
            out.append({name: str(value[name]) for name in ("key", "step", "tool")})
    return out


def read_reconciled(directory: Path) -> dict[str, dict[str, Any]]:
    """A live directory's reconciliations (:data:`RECONCILED_DIR`), by idempotency key."""
    found = {}
    for path in sorted((directory / RECONCILED_DIR).glob("*.json")):
        value = json_object(path)
        if isinstance(value.get("key"), str):
            found[value["key"]] = value
    return found


def live_segments(root: Path, session_id: str) -> list[Path]:
    """The live directories of session ``session_id`` under ``root/sessions``, by index."""
    sessions = Path(root) / SESSIONS_DIR
    found = []
    for path in sessions.glob(f"{session_id}*"):
        rest = path.name[len(session_id) :]
        if path.is_dir() and (rest == "" or re.fullmatch(r"\.[0-9]+", rest)):
            found.append((int(rest[1:]) if rest else 1, path))
    return [path for _, path in sorted(found)]


@dataclass
class Resumed:
    """Where a resumed session starts (built by :func:`prepare_resume`).

    Attributes:
        session: the session's id.
        head: the run directory of the last recorded segment (the recovered one).
        index: that segment's number; the resumed session records segment ``index + 1``.
        link: ``{"run_id", "files_digest"}`` of ``head``, the next segment's ``previous``.
        keys: the session's keys; the resumed session counts each recorded call's
            occurrence as it serves the call (:meth:`SessionKeys.count
            <toolproof.tools.idempotency.SessionKeys.count>`), so a live call after them
            gets the key it would have had.
        cut: the cut calls by key: ``{"step", "tool", "key"}`` (intents with no record).
        run_ids: the chain's run ids, segment 1 first.
        reconciled: a person's reconciliations of cut calls, by key.
        dropped: what recovering the live directories dropped, one message each, naming
            the live directory and the run it became (the run's ``recovery.json`` keeps
            the same list; empty when every line was whole).
        verified: the runs recovered here, verified by the checks their recovery ran
            over the files it wrote, by run id (the chain's verification takes them:
            :meth:`~toolproof.sessions.frozen.FrozenSession.load_chain`).

    """

    session: str
    head: Path
    index: int
    link: dict[str, str]
    keys: SessionKeys
    cut: dict[str, dict[str, str]] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    reconciled: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    verified: dict[str, Verification] = field(default_factory=dict)


def _segment_of(live: Path, session_id: str) -> dict[str, Any]:
    """The live directory's ``segment.json``, written as segment 1 when it has none."""
    value = json_object(live / SEGMENT_FILE)
    if value:
        return value
    value = {"session": session_id, "index": 1, "previous": None}
    write_segment(live, value, session_id, "resume")
    return value


def _chain(head: Path, session_id: str) -> list[Path]:
    """The runs of the chain ending at ``head``, segment 1 first, by their links.

    Each link's predecessor digest is checked here; the segments themselves are verified
    once, when the resumed session loads them for serving
    (:meth:`~toolproof.sessions.frozen.FrozenSession.load_chain`).

    Raises:
        InputError: a link does not hold or a predecessor is missing.

    """
    directories: list[Path] = []
    directory: Path | None = head
    while directory is not None:
        directories.append(directory)
        link = check_link(directory)
        if link.status in ("none", "first"):
            break
        if link.status != "checked":
            raise InputError(f"session {session_id!r}: cannot resume: {link.message}")
        directory = link.previous
    return directories[::-1]


async def prepare_resume(root: Path, session_id: str, toolset: Toolset) -> Resumed:
    """Recover the crashed session ``session_id`` under ``root`` and say where to resume.

    Args:
        root: the artifact root.
        session_id: the session's name.
        toolset: the Toolset the agent runs with now; its descriptor must be the one the
            session recorded (the keys name its tools' fingerprints).

    Returns:
        The :class:`Resumed` (its ``head`` is the recovered run).

    Raises:
        InputError: no live directory of the session is left (nothing to resume: see
            ``toolproof sessions list``), one has no readable runtime record (its
            recorder stopped before writing it), its recorder is still running, it recorded
            another session or Toolset, or a link of the chain it ends does not hold
            (the resumed session verifies every segment before serving it).
        RecordingError: a recovered segment cannot be written (a full disk): what is
            not recovered yet stays live, to resume again once there is room.

    When more than one live segment is left (the crash came while a full segment
    awaited its seal), each is recovered in order, each linked to the one before.

    """
    lives = live_segments(root, check_session_id(session_id))
    where = Path(root) / SESSIONS_DIR
    if not lives:
        raise InputError(
            f"session {session_id!r}: no unfinished session of that name under {where} "
            "(rule: a resume continues a session a crash left; see toolproof sessions list)"
        )
    intents: list[dict[str, str]] = []
    reconciled: dict[str, dict[str, Any]] = {}
    recorded: set[str] = set()  # the keys of the calls the live directories kept
    dropped: list[str] = []
    verified: dict[str, Verification] = {}
    outcome = None
    for live in lives:  # a crash while a full segment awaited its seal leaves two
        try:
            runtime = ExecutionRuntime.model_validate_json((live / RUNTIME_FILE).read_bytes())
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not a runtime record"
            raise InputError(
                f"session {session_id!r}: {live / RUNTIME_FILE}: {reason} (rule: a session "
                "resumes from the runtime its recorder wrote first; with none, nothing of it "
                "ran: move the directory aside to start the session anew)"
            ) from None
        if runtime.session != session_id or runtime.toolset.id != toolset.descriptor().id:
            raise InputError(
                f"session {session_id!r}: {live} recorded session {runtime.session!r} with "
                f"Toolset {runtime.toolset.id}; resuming needs the same session and Toolset "
                f"(now {toolset.descriptor().id})"
            )
        index = int(_segment_of(live, session_id).get("index", 1))
        # sealed before it could link: the one rule verify --recover follows too
        link_live(live, "resume", outcome.path if outcome is not None else None)
        intents += read_intents(live)
        reconciled.update(read_reconciled(live))
        outcome = await recover_session(live)
        recorded |= outcome.keys
        if outcome.verification is not None:  # None: committed by an earlier attempt
            verified[outcome.run_id] = outcome.verification
        dropped += [f"{live} (recovered into {outcome.path}): {item}" for item in outcome.dropped]
    assert outcome is not None
    directories = _chain(outcome.path, session_id)
    link = link_of(outcome.path)
    keys = SessionKeys.of(session_id, runtime.toolset)  # counted as the record is served
    # an intent is logged in the live segment that admits its call, which records it
    # there (or, carried by a resume, in a later segment): always one of those recovered
    cut = {i["key"]: i for i in intents if i["key"] not in recorded}
    run_ids = [directory.name for directory in directories]
    kept = {key: value for key, value in reconciled.items() if key in cut}
    found = (keys, cut, run_ids, kept, dropped, verified)
    return Resumed(session_id, outcome.path, index, link, *found)
