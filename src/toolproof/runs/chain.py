"""The links between the segments of a sealed session, and the check of a whole chain.

A session sealed into segments (:mod:`toolproof.runs.segments`) is a chain of runs:
each run's ``segment.json`` names the session, its index (1 and up) and its
predecessor's run id and manifest ``files_digest``. :func:`check_link` checks one link
(the predecessor is looked up beside the run, under the same ``ROOT/runs``);
:func:`verify_chain` verifies every segment from the head back to segment 1, one at a
time (memory: one segment's verify, whatever the chain's length).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from toolproof.bundle.rundir import RUNS_DIR
from toolproof.contract.layout import MANIFEST_FILE, SESSION_FILE, SESSIONS_DIR
from toolproof.contract.runs import Manifest
from toolproof.runs.seglink import sealed_segment
from toolproof.verify.acted import ChainKeys
from toolproof.verify.keys import SEGMENT_FILE
from toolproof.verify.verifier import Verification, verify_run

__all__ = [
    "ChainVerification",
    "LinkCheck",
    "SegmentLink",
    "SegmentResult",
    "check_link",
    "read_link",
    "verify_chain",
]

LinkStatus = Literal["none", "first", "checked", "absent", "unlinked", "broken"]
"""``none``: not a segment; ``first``: segment 1 (no predecessor); ``checked``: the
predecessor is there and its manifest's files digest is the one recorded; ``absent``: the
predecessor is not under the same root; ``unlinked``: a segment after the first whose
link was never written (recovered before its predecessor was sealed); ``broken``: the
link does not hold (the message says why)."""


@dataclass(frozen=True)
class SegmentLink:
    """A run's ``segment.json``.

    Attributes:
        session: the session's name (its first live directory's, ``<stamp>-<pid>``).
        index: the segment's number, 1 and up.
        previous_run_id: the predecessor's run id (``""`` for segment 1, or unlinked).
        previous_files_digest: the predecessor's manifest ``files_digest`` (``sha256:``).

    """

    session: str
    index: int
    previous_run_id: str = ""
    previous_files_digest: str = ""


@dataclass(frozen=True)
class LinkCheck:
    """What :func:`check_link` found.

    Attributes:
        status: see :data:`LinkStatus`.
        message: one line saying what was checked, or why the link does not hold.
        link: the run's link, or ``None`` when it is not a segment.
        previous: the predecessor's directory when it is there, else ``None``.

    """

    status: LinkStatus
    message: str
    link: SegmentLink | None = None
    previous: Path | None = None

    @property
    def ok(self) -> bool:
        """False only when the link is ``broken``."""
        return self.status != "broken"

    def to_json(self) -> dict[str, Any]:
        """``{"status", "message", "session", "index", "previous_run_id"}``."""
        link = self.link
        return {
            "status": self.status,
            "message": self.message,
            "session": link.session if link else None,
            "index": link.index if link else None,
            "previous_run_id": (link.previous_run_id or None) if link else None,
        }


def read_link(directory: Path) -> SegmentLink | None:
    """The ``segment.json`` of a run directory, or ``None`` when it has none.

    Raises:
        ValueError: the file is not a segment link (the message names the rule).
        OSError: it cannot be read.

    """
    path = Path(directory) / SEGMENT_FILE
    if not path.is_file():
        return None
    value = json.loads(path.read_bytes())
    if not isinstance(value, dict) or set(value) != {"session", "index", "previous"}:
        raise ValueError(f"{SEGMENT_FILE}: expected an object with session, index, previous")
    session, index, previous = value["session"], value["index"], value["previous"]
    if not isinstance(session, str) or type(index) is not int or index < 1:
        raise ValueError(f"{SEGMENT_FILE}: session must be a string and index a whole number >= 1")
    if previous is None:
        return SegmentLink(session, index)
    if (
        not isinstance(previous, dict)
        or not isinstance(previous.get("run_id"), str)
        or not isinstance(previous.get("files_digest"), str)
    ):
        raise ValueError(f"{SEGMENT_FILE}: previous must be null or {{run_id, files_digest}}")
    if index == 1:
        raise ValueError(f"{SEGMENT_FILE}: segment 1 has no predecessor")
    return SegmentLink(session, index, previous["run_id"], previous["files_digest"])


def _short(run_id: str) -> str:
    return run_id[:16] + "…" if len(run_id) > 17 else run_id


def check_link(directory: Path) -> LinkCheck:
    """Check a run's link to its predecessor (looked up beside it, in the same ``runs/``).

    A live segment (``ROOT/sessions/NAME.K``, its ``session.json`` there) links to a
    sealed run: its predecessor is looked up in ``ROOT/runs``. A live segment sealed
    before it could link (``previous`` null, the link is written when it is recovered or
    resumed) is checked against the run under ``ROOT/runs`` whose ``segment.json`` names
    its session and the index before (:func:`~toolproof.runs.seglink.sealed_segment`):
    that run's manifest must load; there is no recorded digest to compare yet.

    The predecessor's ``manifest.json`` must load (its run id and files digest match its
    entries) and its ``files_digest`` must be the one recorded; its ``segment.json`` must
    name the same session and the index before. The predecessor's files are not hashed
    here: :func:`verify_chain` verifies each segment.

    Returns:
        The :class:`LinkCheck`.

    """
    directory = Path(directory)
    try:
        link = read_link(directory)
    except (OSError, ValueError) as exc:
        return LinkCheck("broken", f"{directory.name}: {exc}")
    if link is None:
        return LinkCheck("none", "not a segment of a sealed session")
    this = f"segment {link.index} of session {link.session}"
    if link.index == 1:
        return LinkCheck("first", f"{this}: the first segment", link)
    runs = directory.parent
    live = runs.name == SESSIONS_DIR and (directory / SESSION_FILE).is_file()
    if live:
        runs = runs.parent / RUNS_DIR  # a live segment: its predecessor was sealed into runs/
    found = None
    if live and not link.previous_run_id:
        found = sealed_segment(runs.parent, link.session, link.index - 1)
    if not link.previous_run_id and found is None:
        return LinkCheck(
            "unlinked", f"{this}: no link to segment {link.index - 1} was written", link
        )
    previous = runs / (link.previous_run_id or (found.name if found else ""))
    where = f"{runs.name}/{previous.name}"
    if not (previous / MANIFEST_FILE).is_file():
        message = f"{this}: its predecessor {where} is not under this root (link not checked)"
        return LinkCheck("absent", message, link)
    try:
        manifest = Manifest.model_validate_json((previous / MANIFEST_FILE).read_bytes())
        before = read_link(previous)
    except (OSError, ValueError, ValidationError) as exc:
        reason = str(exc).splitlines()[0]
        message = f"{this}: its predecessor {where} cannot be read ({reason})"
        return LinkCheck("broken", message, link, previous)
    if not link.previous_run_id:  # live, sealed before it could link: found, not linked
        message = (
            f"{this}: no link written yet (recovery or a resume writes it); its sealed "
            f"predecessor by session and index is {runs.name}/{_short(previous.name)} "
            "(manifest read)"
        )
        return LinkCheck("checked", message, link, previous)
    if manifest.files_digest != link.previous_files_digest:
        message = (
            f"{this} links to {where} with files digest {link.previous_files_digest}, but its "
            f"{MANIFEST_FILE} has {manifest.files_digest}: the predecessor changed after "
            f"segment {link.index} was sealed"
        )
        return LinkCheck("broken", message, link, previous)
    if before is None or before.session != link.session or before.index != link.index - 1:
        was = f"segment {before.index} of session {before.session}" if before else "no segment"
        message = f"{this}: its predecessor {where} is {was}, not segment {link.index - 1}"
        return LinkCheck("broken", message, link, previous)
    message = f"{this}: linked to {_short(link.previous_run_id)} (files digest checked)"
    return LinkCheck("checked", message, link, previous)


@dataclass(frozen=True)
class SegmentResult:
    """One segment of a chain as :func:`verify_chain` found it.

    Attributes:
        directory: the segment's run directory.
        run_id: its manifest's run id (``None`` when unreadable).
        verified: the run verifies (:func:`~toolproof.verify.verifier.verify_run`).
        link: its link check.
        failures: one line per failure of its verify.
        notes: one line per note of its verify (``acted-once``: a call recorded
            ``outcome_unknown`` that no person reconciled), reported without failing.

    """

    directory: Path
    run_id: str | None
    verified: bool
    link: LinkCheck
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"run_id", "index", "verified", "link", "failures", "notes"}``."""
        index = self.link.link.index if self.link.link else None
        return {
            "run_id": self.run_id,
            "index": index,
            "verified": self.verified,
            "link": self.link.to_json(),
            "failures": self.failures,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class ChainVerification:
    """What :func:`verify_chain` found, from the head back.

    Attributes:
        segments: each segment checked, head first.
        problem: why the chain does not hold (the first reason), or ``""``.

    """

    segments: list[SegmentResult]
    problem: str = ""

    @property
    def ok(self) -> bool:
        """True when every segment verifies and every link holds, down to segment 1."""
        return not self.problem

    def to_json(self) -> dict[str, Any]:
        """``{"ok", "problem", "segments": [...]}`` (head first)."""
        segments = [segment.to_json() for segment in self.segments]
        return {"ok": self.ok, "problem": self.problem or None, "segments": segments}


def verify_chain(
    head: Path,
    *,
    verify: Callable[[Path], Verification] = verify_run,
    on_segment: Callable[[SegmentResult], None] | None = None,
) -> ChainVerification:
    """Verify a sealed session's chain from its head back to segment 1, one segment at a time.

    Every segment must verify, every link must hold (:func:`check_link`) and every
    predecessor must be under the same root; a run that is not a segment is a chain of
    one. Only each segment's summary is kept, so memory is one segment's verify. Then no
    idempotency key of a tool that must act once was executed in two segments
    (:class:`~toolproof.verify.acted.ChainKeys`, fed from each segment's verify).

    Args:
        head: the last segment's run directory (any segment checks the chain before it).
        verify: how one run is verified (default :func:`verify_run`).
        on_segment: called with each segment's result as it is found (progress).

    Returns:
        The :class:`ChainVerification`; ``problem`` names the first segment that fails.

    """
    results: list[SegmentResult] = []
    keys = ChainKeys()  # fed as the chain is walked: no segment's keys kept whole
    directory: Path | None = Path(head)
    problem = ""
    while directory is not None:
        verification = verify(directory)
        link = check_link(directory)
        failures = [str(failure) for failure in verification.failures]
        notes = [str(note) for note in verification.notes]
        result = SegmentResult(
            directory, verification.run_id, verification.ok, link, failures, notes
        )
        results.append(result)
        keys.add(directory.name, directory, verification.executed)
        if on_segment is not None:
            on_segment(result)
        name = directory.name
        if not verification.ok:
            problem = f"{name} does not verify: {failures[0] if failures else 'unknown'}"
        elif link.status in ("broken", "absent", "unlinked"):
            problem = link.message
        if problem or link.status in ("none", "first"):
            break
        directory = link.previous
    if not problem and len(results) > 1:  # one key, two segments (a resumed session's too)
        problem = keys.problem()
    return ChainVerification(results, problem)
