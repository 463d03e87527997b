"""Unfinished sessions and a person's reconciliation of a cut call (docs/durability.md).

:func:`unfinished_sessions` lists the live directories under ``ROOT/sessions`` (what
``toolproof sessions list`` shows): a session still recording, or one a crash left for
``record_session(..., resume=True)`` or ``toolproof verify --recover``, with its cut
calls (an intent logged, no result recorded: :mod:`toolproof.runs.resume`).

:func:`reconcile` records what a person found about one cut call of an unfinished
session (``toolproof sessions reconcile SESSION CALL --outcome FILE``): the outcome
file's JSON, its digest, who and when, bound to the call's idempotency key (which
digests the session, the tool's fingerprint, the arguments and the occurrence) and its
step, in ``reconciled/<step>.json`` of the session's live directory. When the session
resumes and the agent asks the call again, its ``outcome_unknown`` result carries the
reconciliation (``detail.reconciled``), recorded in the call's block, so the
``acted-once`` check counts it reconciled instead of reporting it.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import recorder_alive, write_file
from toolproof.bundle.trace import TraceReader
from toolproof.contract.layout import RUNTIME_FILE, TRACE_FILE
from toolproof.errors import CanonicalizationError, InputError
from toolproof.identity import MAX_DEPTH, canonical_json, digest
from toolproof.runs.committed import committed_already
from toolproof.runs.header import header_problem
from toolproof.runs.live import SESSION_FILE, SESSIONS_DIR
from toolproof.runs.resume import (
    RECONCILED_DIR,
    check_session_id,
    json_object,
    live_segments,
    read_intents,
    read_reconciled,
)

__all__ = [
    "MAX_OUTCOME_BYTES",
    "cut_calls",
    "not_sessions",
    "reconcile",
    "unfinished_sessions",
]

MAX_OUTCOME_BYTES = 1 << 20
"""The largest outcome file :func:`reconcile` takes (1 MiB)."""


def _trace_calls(directory: Path) -> tuple[int, set[str]]:
    """``(calls returned, idempotency keys of the calls recorded)`` of a live trace.

    One pass in blocks (:class:`~toolproof.bundle.trace.TraceReader`): memory is one
    block plus one line of at most ``MAX_LINE_BYTES``; a longer line, a torn one or one
    the recorder did not write counts for nothing. A missing trace is ``(0, set())``.
    """
    calls = 0
    recorded: set[str] = set()
    try:
        for line in TraceReader(directory / TRACE_FILE).lines():
            data = line.data
            if data is None:
                continue
            calls += data.count(b'"type":"tool_returned"')
            if b'"tool_called"' in data:
                try:
                    event = json.loads(data)
                except (ValueError, RecursionError):  # torn, or not the recorder's
                    continue
                if isinstance(event, dict):
                    recorded.add(str(event.get("idempotency_key")))
    except OSError:
        pass
    return calls, recorded


def cut_calls(directory: Path) -> list[dict[str, str]]:
    """The intents of a live directory with no ``tool_called`` of their key in its trace.

    Reads the trace once in bounded memory (see :func:`_trace_calls`).
    """
    _, recorded = _trace_calls(directory)
    return [intent for intent in read_intents(directory) if intent["key"] not in recorded]


def _check_root(root: Path) -> Path:
    """``root/sessions``, once ``root`` is a directory.

    Raises:
        InputError: ``root`` is missing or a file.

    """
    if not Path(root).is_dir():
        what = "a file, not a directory" if Path(root).exists() else "no directory"
        raise InputError(
            f"--root {root}: {what} (rule: the root is the artifact directory that holds "
            f"{SESSIONS_DIR}/ and runs/)"
        )
    return Path(root) / SESSIONS_DIR


def _directories(sessions: Path) -> list[Path]:
    """The directories under ``sessions`` (a name starting with "." is one being removed)."""
    return sorted(p for p in sessions.glob("[!.]*") if p.is_dir())


def not_sessions(root: Path) -> list[dict[str, str]]:
    """The directories under ``root/sessions`` that are not live sessions, in name order.

    A live session's directory holds the ``session.json`` its recorder writes first, a
    JSON object; a directory without one (put there by hand, or a copy), or whose
    ``session.json`` is not a JSON object, is none, and :func:`unfinished_sessions`
    leaves it out.

    Returns:
        One ``{"directory", "reason"}`` each.

    Raises:
        InputError: ``root`` is not a directory.

    """
    strays = [(directory, _stray(directory)) for directory in _directories(_check_root(root))]
    return [{"directory": d.name, "reason": reason} for d, reason in strays if reason is not None]


def _stray(directory: Path) -> str | None:
    """Why ``directory`` is no live session (``session.json: not JSON``), ``None`` if it is."""
    if not (directory / SESSION_FILE).is_file():
        return f"no {SESSION_FILE}"
    problem = header_problem(directory)
    return None if problem is None else f"{SESSION_FILE}: {problem}"


def unfinished_sessions(root: Path) -> list[dict[str, Any]]:
    """Every live directory under ``root/sessions`` (one holding ``session.json``), in name order.

    Returns:
        One ``{"directory", "session", "started_at", "pid", "state", "running",
        "committed", "calls", "cut", "reconciled"}`` per live directory: ``state`` is
        ``running`` (its recorder still runs), ``stopped`` (a crash or a kill left it) or
        ``committed`` (its run was committed before a kill kept the directory:
        ``committed`` names that run, and a resume or ``verify --recover`` removes the
        directory without committing it again; :mod:`toolproof.runs.committed`);
        ``running`` is ``state == "running"``; ``calls`` the calls its trace recorded,
        ``cut`` its cut calls (``{"step", "tool", "key"}``),
        ``reconciled`` the cut calls' steps a person reconciled.

    Raises:
        InputError: ``root`` is not a directory (missing, or a file); a root with no
            ``sessions`` folder has no unfinished session (``[]``).

    """
    out = []
    for directory in _directories(_check_root(root)):
        if _stray(directory) is not None:
            continue  # not a session (not_sessions)
        header, runtime = (
            json_object(directory / SESSION_FILE),
            json_object(directory / RUNTIME_FILE),
        )
        calls, recorded = _trace_calls(directory)
        pid = header.get("pid")
        running = pid == os.getpid() or recorder_alive(pid, header.get("process"))
        done = None if running else committed_already(directory, Path(root))
        state = "running" if running else "stopped" if done is None else "committed"
        cut = [i for i in read_intents(directory) if i["key"] not in recorded]
        reconciled = read_reconciled(directory)
        out.append(
            {
                "directory": directory.name,
                "session": str(runtime.get("session") or directory.name),
                "started_at": str(header.get("started_at", "")),
                "pid": pid,
                "state": state,
                "running": bool(running),
                "committed": done[0].name if done is not None else None,
                "calls": calls,
                "cut": cut,
                "reconciled": sorted(str(r.get("step")) for r in reconciled.values()),
            }
        )
    return out


def reconcile(root: Path, session_id: str, call: str, outcome: Path, who: str) -> dict[str, Any]:
    """Record a person's finding about cut call ``call`` of unfinished session ``session_id``.

    Args:
        root: the artifact root.
        session_id: the session's name.
        call: the cut call's step (``call-00000004``) or its idempotency key.
        outcome: a JSON file saying what the person found (at most
            :data:`MAX_OUTCOME_BYTES`), e.g. ``{"acted": true, "charge": "ch_1"}``.
        who: who found it (the OS user, for the CLI).

    Returns:
        The reconciliation as stored: ``{"session", "step", "tool", "key", "outcome",
        "outcome_digest", "who", "at"}``.

    Raises:
        InputError: no unfinished session of that name, no cut call ``call`` in it, it
            was reconciled already, or the outcome file is missing, too large, not
            JSON, nested deeper than :data:`~toolproof.identity.MAX_DEPTH` or holds
            ``NaN``/``Infinity`` (no canonical form).

    """
    lives = live_segments(Path(root), check_session_id(session_id))
    if not lives:
        raise InputError(
            f"session {session_id!r}: no unfinished session of that name under "
            f"{Path(root) / SESSIONS_DIR} (rule: a call is reconciled before the session "
            "resumes; see toolproof sessions list)"
        )
    cut = [(live, intent) for live in lives for intent in cut_calls(live)]
    found = [(live, i) for live, i in cut if call in (i["step"], i["key"])]
    if not found:
        known = ", ".join(intent["step"] for _, intent in cut) or "none"
        raise InputError(
            f"session {session_id!r}: no cut call {call!r} in an unfinished session of that "
            f"name under {Path(root) / SESSIONS_DIR} (cut calls: {known}; rule: only a cut "
            "call, its intent logged and no result recorded, is reconciled)"
        )
    live, intent = found[0]
    target = live / RECONCILED_DIR / f"{intent['step']}.json"
    if target.exists():
        raise InputError(f"session {session_id!r}: call {intent['step']} is reconciled already")
    try:
        if outcome.stat().st_size > MAX_OUTCOME_BYTES:
            raise InputError(f"--outcome {outcome}: over {MAX_OUTCOME_BYTES} bytes")
        data = outcome.read_bytes()
        value = json.loads(data)
        canonical_json(value)
    except CanonicalizationError as exc:
        raise InputError(
            f"--outcome {outcome}: not plain JSON ({exc.rule} at {exc.path})"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"--outcome {outcome}: not a readable JSON file ({exc})") from exc
    except RecursionError:  # the parser recurses per nesting level
        raise InputError(
            f"--outcome {outcome}: nested too deeply to parse (rule: at most {MAX_DEPTH} levels)"
        ) from None
    stored = {
        "session": session_id,
        **intent,
        "outcome": value,
        "outcome_digest": digest(data),
        "who": who,
        "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    target.parent.mkdir(exist_ok=True)
    write_file(target, canonical_json(stored))
    return stored
