"""``verify``: the manifest first, then the ordered checks, then the stored report.

1. ``manifest`` (``INV-MANIFEST``, critical): every file listed with its size and
   digest, nothing unlisted, paths relative POSIX, run id recomputed. If it fails,
   nothing else is trusted and nothing else runs.
2. The ordered checks (:data:`toolproof.verify.checks.CHECKS`, then the spec's
   additional ``[[checks]]``; see :mod:`toolproof.verify.sequence`) produce a report.
   ``checks`` (``INV-CHECKS``, critical): every additional check the run names can be
   built now, with the identity recorded in ``runtime.json``.
3. ``report`` (``INV-REPORT``, critical): ``report.json`` equals the recomputed
   report byte for byte; ``timings`` (``INV-TIMINGS``, critical): ``timings.json``
   parses.

A run whose runtime records a ``[policy]`` set has the ``policy`` check in its
sequence, right after the built-ins (:func:`~toolproof.verify.sequence.with_recorded`).
Beside the sequence, in the same pass and outside ``report.json`` (so the report and
the run id of a run it does not apply to are unchanged): ``acted-once`` for a session
run whose runtime records ``repeatable``. Its findings that fail under the policy are
failures; the others are :attr:`Verification.notes`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.manifest import check_manifest, entry_finding
from toolproof.bundle.trace import MAX_LINE_BYTES
from toolproof.contract.layout import (
    REPORT_FILE,
    RUNTIME_FILE,
    SPEC_FILE,
    TIMINGS_FILE,
    TRACE_FILE,
)
from toolproof.contract.runs import Finding, Manifest, Policy, Report, Severity, Timings
from toolproof.errors import InputError
from toolproof.identity import canonical_json
from toolproof.verify.acted import ACTED_ONCE_CHECK, ActedOnceState, acted_once_state
from toolproof.verify.base import Check
from toolproof.verify.checks import CHECKS, check_findings, report_of
from toolproof.verify.sequence import CheckRegistry, check_sequence, with_recorded
from toolproof.verify.view import RunView

__all__ = [
    "OUTER_CHECKS",
    "Judged",
    "Progress",
    "Verification",
    "VerificationFailure",
    "judge",
    "verify_run",
]

Progress = Callable[[int, int], None]
"""Called as verification reads: ``(bytes read since the last call, total bytes to read)``."""

OUTER_CHECKS = (
    ("manifest", "INV-MANIFEST", "every file listed with size and digest; nothing else"),
    ("checks", "INV-CHECKS", "every additional check can be built, with its recorded identity"),
    ("report", "INV-REPORT", "report.json equals the recomputed report"),
    ("timings", "INV-TIMINGS", "timings.json parses"),
)
"""Checks around the ordered sequence: (id, invariant, summary)."""


@dataclass(frozen=True)
class VerificationFailure:
    """A finding that fails verification, with the check that made it."""

    check: str
    finding: Finding

    def to_json(self) -> dict[str, Any]:
        """``{"check", "severity", "file", "message"}``."""
        return {
            "check": self.check,
            "severity": self.finding.severity.value,
            "file": self.finding.file,
            "message": self.finding.message,
        }

    def __str__(self) -> str:
        where = f"{self.finding.file}: " if self.finding.file else ""
        return f"[{self.check}] {where}{self.finding.message}"


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one run directory.

    Attributes:
        directory: the run directory.
        run_id: the manifest's run id (``None`` when the manifest is unreadable).
        report: the recomputed report (``None`` when the manifest check failed).
        failures: what fails verification, manifest first, then the ordered checks,
            then ``report``/``timings``, then ``acted-once``.
        notes: findings of ``acted-once`` reported without failing
            under the policy (an ``outcome_unknown`` call a person should reconcile).

    """

    directory: Path
    run_id: str | None
    report: Report | None
    failures: list[VerificationFailure] = field(default_factory=list)
    notes: list[VerificationFailure] = field(default_factory=list)
    executed: dict[str, tuple[str, str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing fails."""
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        """The verification as JSON: run id, ok, failures, the report (and notes, if any)."""
        document: dict[str, Any] = {
            "run_id": self.run_id,
            "ok": self.ok,
            "failures": [failure.to_json() for failure in self.failures],
            "report": self.report.to_json() if self.report is not None else None,
        }
        if self.notes:
            document["notes"] = [note.to_json() for note in self.notes]
        return document


def _outer(directory: Path, view: RunView, report: Report) -> list[VerificationFailure]:
    out = []
    raw = (directory / REPORT_FILE).read_bytes() if (directory / REPORT_FILE).is_file() else b""
    if raw != canonical_json(report.to_json()):
        message = (
            "report.json is missing"
            if not raw
            else "report.json differs from the report recomputed now "
            f"({report.id}); it was edited, or written by another check sequence"
        )
        out.append(
            VerificationFailure(
                "report", Finding(severity=Severity.CRITICAL, file=REPORT_FILE, message=message)
            )
        )
    try:
        Timings.model_validate_json((directory / TIMINGS_FILE).read_bytes())
    except (ValidationError, OSError) as exc:
        message = f"timings.json is missing or invalid: {type(exc).__name__}"
        out.append(
            VerificationFailure(
                "timings", Finding(severity=Severity.CRITICAL, file=TIMINGS_FILE, message=message)
            )
        )
    return out


def _sequence(
    view: RunView, registry: CheckRegistry
) -> tuple[tuple[Check, ...], list[tuple[str, str]]]:
    """The run's check sequence, and problems building it (file, message)."""
    spec = view.spec_head  # the checks are in the head; the steps are not read
    if spec is None or not spec.checks:
        if view.runtime is not None and view.runtime.checks:
            return CHECKS, [(RUNTIME_FILE, "runtime.json names checks the spec does not")]
        return CHECKS, []
    try:
        checks, descriptors = check_sequence(spec.checks, registry)
    except InputError as exc:
        return CHECKS, [(SPEC_FILE, f"{exc.message}; install it to verify this run")]
    recorded = view.runtime.checks if view.runtime is not None else []
    if descriptors != recorded:
        now = ", ".join(f"{d.name}/{d.version}" for d in descriptors)
        then = ", ".join(f"{d.name}/{d.version}" for d in recorded) or "none"
        message = (
            f"the additional checks are not the ones the run recorded (recorded {then}; "
            f"installed now {now}); verify with the recorded versions, or re-run"
        )
        return checks, [(RUNTIME_FILE, message)]
    return checks, []


def _outside(view: RunView) -> tuple[tuple[Check, ...], ActedOnceState | None]:
    """The checks outside the report's sequence that apply to the run, and acted-once's state."""
    state = acted_once_state(view)  # docs/durability.md; None: it does not apply
    if state is None:
        return (), None
    return (dataclasses.replace(ACTED_ONCE_CHECK, stream=lambda _: state),), state


def _trace_entry(manifest: Manifest) -> Any:
    return next((entry for entry in manifest.files if entry.path == TRACE_FILE), None)


@dataclass(frozen=True)
class Judged:
    """A run's checks judged (:func:`judge`): what its verification holds beside the files.

    Attributes:
        stored: the report under the run's own policy (what ``report.json`` holds).
        report: the report under the policy asked (``stored`` when it is the run's own).
        failures: the findings of ``report`` that fail, as failures.
        outside: the findings of the checks outside the report (``acted-once``) that
            fail under ``report``'s policy.
        notes: those that do not fail.
        executed: ``acted-once``'s executed keys (``{}`` when it does not apply).

    """

    stored: Report
    report: Report
    failures: list[VerificationFailure]
    outside: list[VerificationFailure]
    notes: list[VerificationFailure]
    executed: dict[str, tuple[str, str, int]]

    def verification(self, directory: Path, run_id: str) -> Verification:
        """The verification of the run these checks judged, committed as ``directory``.

        For a run whose files the caller itself wrote and judged before committing them
        (a recovered session's run: its manifest lists the digests computed as it wrote,
        its ``report.json`` is :attr:`stored`), so the manifest and report checks hold.
        """
        failures = [*self.failures, *self.outside]
        return Verification(directory, run_id, self.report, failures, self.notes, self.executed)


def judge(
    view: RunView,
    sequence: tuple[Check, ...],
    own: Policy,
    policy: Policy | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> Judged:
    """Run a run's checks in one pass over its trace and judge their findings.

    The one judgement of a run's findings: :func:`verify_run` judges a committed run
    with it, and a recording run its own files before they are committed
    (:func:`~toolproof.runs.run.record_run`, whose ``report.json`` is :attr:`Judged.stored`).

    Args:
        view: the run's files (its trace not read yet).
        sequence: the report's check sequence (``policy`` included for a ``[policy]`` run).
        own: the run's own policy (its spec's).
        policy: the policy to judge by (default ``own``).
        progress: called with the number of bytes of each block of the trace read.

    Returns:
        The :class:`Judged`; ``acted-once`` runs beside the sequence, outside the
        report, when the run's runtime records ``repeatable``.

    """
    extra, acted = _outside(view)  # outside the report's sequence
    found = check_findings(view, (*sequence, *extra), progress=progress)
    found, outside = found[: len(sequence)], found[len(sequence) :]
    stored = report_of(sequence, found, own)
    report = stored if policy in (None, own) else report_of(sequence, found, policy)
    failures = [VerificationFailure(result.check, item) for result, item in report.failing()]
    judged = [
        VerificationFailure(check.id, item)
        for check, items in zip(extra, outside, strict=True)
        for item in items or ()
    ]
    failing = [item for item in judged if report.policy.fails(item.finding.severity)]
    notes = [item for item in judged if not report.policy.fails(item.finding.severity)]
    executed = acted.executed_keys() if acted is not None else {}
    return Judged(stored, report, failures, failing, notes, executed)


def verify_run(
    directory: Path,
    *,
    policy: Policy | None = None,
    checks: CheckRegistry | None = None,
    progress: Progress | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Verification:
    """Verify a run directory, reading each of its bytes once.

    The evidence and small files are hashed by the manifest check; ``trace.jsonl`` is
    read once, in blocks, by the pass that parses its lines and feeds every check's
    state (:func:`~toolproof.verify.checks.check_findings`), and hashed by that same
    read: when its bytes are not the manifest's, the manifest check fails and the
    checks' findings are dropped, as if nothing else had run. Memory stays bounded by
    one block, the longest line and the checks' per-call sets, not by the trace.

    Args:
        directory: the run directory (``<root>/runs/<run_id>``).
        policy: the policy to judge by; default the spec's own policy.
        checks: where the spec's additional checks resolve (default: a new
            :class:`CheckRegistry`, which finds the installed entry points).
        progress: called as bytes are read (see :data:`Progress`).
        max_line_bytes: the longest trace line accepted
            (:data:`~toolproof.bundle.trace.MAX_LINE_BYTES`).

    Returns:
        The :class:`Verification`; ``ok`` is False when any check fails.

    """
    directory = Path(directory)
    policy = Policy(policy) if policy is not None else None
    manifest, digests, findings = check_manifest(directory, defer=(TRACE_FILE,), progress=progress)
    if findings:
        failures = [VerificationFailure("manifest", item) for item in findings]
        return Verification(directory, manifest.run_id if manifest else None, None, failures)
    assert manifest is not None
    view = RunView(
        directory,
        digests,
        {entry.path: entry.size for entry in manifest.files},
        max_line_bytes=max_line_bytes,
    )
    own = view.spec_head.policy if view.spec_head is not None else Policy.STRICT
    sequence, problems = _sequence(view, checks if checks is not None else CheckRegistry())
    recorded = view.runtime is not None and view.runtime.toolset.policy is not None
    sequence = with_recorded(sequence, recorded)  # a [policy] run's report has `policy`
    tick = None
    if progress is not None:
        advance, total = progress, sum(entry.size for entry in manifest.files)

        def tick(count: int) -> None:
            advance(count, total)

    judged = judge(view, sequence, own, policy, progress=tick)
    trace = _trace_entry(manifest)
    if trace is not None and view.trace_size is not None and view.trace_digest is not None:
        changed = entry_finding(trace, view.trace_size, view.trace_digest)
        if changed is not None:
            return Verification(
                directory, manifest.run_id, None, [VerificationFailure("manifest", changed)]
            )
    failures = list(judged.failures)
    failures += [
        VerificationFailure("checks", Finding(severity=Severity.CRITICAL, file=file, message=text))
        for file, text in problems
    ]
    failures += _outer(directory, view, judged.stored)
    failures += judged.outside
    report, notes, executed = judged.report, judged.notes, judged.executed
    return Verification(directory, manifest.run_id, report, failures, notes, executed)
