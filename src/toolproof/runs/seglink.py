"""The one rule that links a live segment to its sealed predecessor.

A segmented session seals segment ``K`` into ``ROOT/runs`` and opens ``K + 1`` in
``ROOT/sessions/NAME.K+1``; the new segment's ``segment.json`` is written with
``previous: null`` and gets its link (``{"run_id", "files_digest"}`` of segment ``K``)
only when it is finalized. A crash between the two leaves a live segment with no link.
:func:`link_live` writes it before the segment becomes a run, whoever recovers it: a
resume (:func:`~toolproof.runs.resume.prepare_resume`) or ``toolproof verify
--recover`` (:func:`~toolproof.runs.finalize.recover_session`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from toolproof.bundle.rundir import RUNS_DIR, write_file
from toolproof.contract.layout import MANIFEST_FILE, SESSIONS_DIR
from toolproof.contract.runs import Manifest
from toolproof.errors import InputError, RecordingError
from toolproof.runs.header import read_object
from toolproof.verify.keys import SEGMENT_FILE

__all__ = ["json_object", "link_live", "link_of", "sealed_segment", "write_segment"]


def json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or ``{}`` when it is missing or not one."""
    return read_object(path)[0] or {}


def link_of(run: Path) -> dict[str, str]:
    """``{"run_id", "files_digest"}`` of a committed run: a next segment's ``previous``.

    Raises:
        OSError: the run's ``manifest.json`` cannot be read.
        pydantic.ValidationError: it is not a manifest.

    """
    manifest = Manifest.model_validate_json((run / MANIFEST_FILE).read_bytes())
    return {"run_id": run.name, "files_digest": manifest.files_digest}


def sealed_segment(root: Path, session_id: str, index: int) -> Path | None:
    """The run under ``root/runs`` that is segment ``index`` of ``session_id``, or ``None``.

    Found by its ``segment.json`` (session and index) and a ``manifest.json`` beside it;
    with more than one, the first by run id.
    """
    for run in sorted((Path(root) / RUNS_DIR).glob("run_*")):
        segment = json_object(run / SEGMENT_FILE)
        same = segment.get("session") == session_id and segment.get("index") == index
        if same and (run / MANIFEST_FILE).is_file():
            return run
    return None


def write_segment(live: Path, value: dict[str, Any], session_id: str, doing: str) -> None:
    """Replace ``live``'s ``segment.json`` atomically (the old one or the new, never half).

    Args:
        live: the live segment's directory.
        value: the ``{"session", "index", "previous"}`` to write.
        session_id: the session's name (for the message).
        doing: ``"resume"`` or ``"recover"`` (for the message).

    Raises:
        RecordingError: it cannot be written (a full disk); the live session is kept.

    """
    path = live / SEGMENT_FILE
    staged = path.with_name(f"{SEGMENT_FILE}.new")
    try:
        staged.unlink(missing_ok=True)
        write_file(staged, json.dumps(value, sort_keys=True).encode("utf-8"))
        os.replace(staged, path)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise RecordingError(
            f"session {session_id!r}: cannot {doing}: cannot write {exc.filename or path}: "
            f"{exc.strerror or exc}; the live session is kept: make room and {doing} again",
            path=str(exc.filename or path),
        ) from exc


def link_live(live: Path, doing: str, before: Path | None = None) -> None:
    """Write the link of live segment ``live`` to its predecessor when it has none.

    A live directory with no ``segment.json``, segment 1, or one already linked is left
    as it is. Otherwise its ``previous`` becomes :func:`link_of` the predecessor:
    ``before`` when given (a resume recovering several live segments in order), else the
    sealed run of the index before under ``ROOT/runs`` (:func:`sealed_segment`; ``ROOT``
    is two levels above ``live``).

    Args:
        live: the live segment's directory (``ROOT/sessions/NAME.K``).
        doing: ``"resume"`` or ``"recover"`` (for messages).
        before: the predecessor's run directory, when the caller knows it.

    Raises:
        InputError: the predecessor is neither given nor sealed under ``ROOT/runs``
            (the message says whether it is still live, to recover first).
        RecordingError: the link cannot be written (a full disk).

    """
    segment = json_object(live / SEGMENT_FILE)
    index, session_id = segment.get("index"), segment.get("session")
    if type(index) is not int or index <= 1 or segment.get("previous") is not None:
        return
    if not isinstance(session_id, str):
        raise InputError(f"{live / SEGMENT_FILE}: segment {index} names no session")
    root = live.parent.parent
    found = before if before is not None else sealed_segment(root, session_id, index - 1)
    if found is None:
        name = session_id if index == 2 else f"{session_id}.{index - 1}"
        still = root / SESSIONS_DIR / name
        where = f"still live at {still}: recover it first" if still.is_dir() else "not there"
        raise InputError(
            f"session {session_id!r}: cannot {doing} live segment {index}: segment "
            f"{index - 1} is not sealed under {root / RUNS_DIR} ({where}); rule: a segment "
            "links to its sealed predecessor"
        )
    segment["previous"] = link_of(found)
    write_segment(live, segment, session_id, doing)
