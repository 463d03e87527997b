"""Provenance checks: grounding, evidence digests, spans, completeness, finalize, budget."""

from __future__ import annotations

from toolproof.contract.evidence import ClaimStatus, ClaimType, EvidenceRecord
from toolproof.contract.layout import CLAIMS_FILE, TRACE_FILE
from toolproof.contract.runs import Finding, Severity, StepKind
from toolproof.contract.trace import (
    EvidenceRegistered,
    ResourceRead,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import InputError
from toolproof.evidence.encoding import encode_value, read_contents
from toolproof.identity import digest, digest_of_hex
from toolproof.verify.answers import check_answer_details
from toolproof.verify.base import MAX_FINDINGS, finding
from toolproof.verify.view import RunView

__all__ = [
    "check_budget",
    "check_evidence_digests",
    "check_finalize",
    "check_grounding",
    "check_required_steps",
    "check_support_spans",
]

_CRIT = Severity.CRITICAL


def _span(view: RunView, evidence: str, start: int, end: int) -> bytes | None:
    if evidence not in view.evidence:
        return None
    return view.evidence.read(evidence, start, end)


def check_grounding(view: RunView) -> list[Finding] | None:
    """A validated claim is derived, has ``min_supports`` supports, and quotes them exactly.

    An agent's answer at grounding level ``details`` is also derived again from the
    spec and the stored bytes (:mod:`toolproof.verify.answers`).
    """
    if view.claims is None or view.spec is None:
        return None
    out: list[Finding] = []
    minimum = view.spec.reasoner.min_supports
    for claim in view.claims:
        label = f"claim {claim.id} ({claim.statement[:60]!r})"
        if claim.status == ClaimStatus.VALIDATED:
            if claim.type != ClaimType.DERIVED:
                out.append(
                    finding(
                        Severity.ERROR,
                        CLAIMS_FILE,
                        f"{label} is {claim.type} "
                        "but validated; only derived claims can be validated",
                    )
                )
            elif len(claim.supports) < minimum:
                out.append(
                    finding(
                        Severity.ERROR,
                        CLAIMS_FILE,
                        f"{label} has "
                        f"{len(claim.supports)} supports, min_supports is {minimum}; "
                        "mark it insufficient_evidence or cite more evidence",
                    )
                )
        elif claim.status == ClaimStatus.UNVALIDATED and claim.type == ClaimType.DERIVED:
            # a derivation that failed its own grounding (an answer quoting text that no
            # recorded result holds): the run's claim is not supported
            out.append(
                finding(
                    Severity.ERROR,
                    CLAIMS_FILE,
                    f"{label} is derived but not validated: {claim.reason or 'no reason given'}",
                )
            )
        elif claim.status == ClaimStatus.INSUFFICIENT_EVIDENCE:
            # Saying "not enough evidence" is the honest outcome, not a defect: reported
            # as info. A failed step behind it is flagged by the required-steps check.
            out.append(
                finding(
                    Severity.INFO,
                    CLAIMS_FILE,
                    f"{label}: insufficient evidence: {claim.reason or 'no reason given'}",
                )
            )
        for citation in claim.citations:
            if citation.support >= len(claim.supports):
                out.append(
                    finding(
                        Severity.ERROR,
                        CLAIMS_FILE,
                        f"{label} cites support #{citation.support}, which it does not have",
                    )
                )
                continue
            support = claim.supports[citation.support]
            data = _span(view, support.evidence, support.start, support.end)
            if data is not None and data != citation.text.encode("utf-8"):
                out.append(
                    finding(
                        Severity.ERROR,
                        CLAIMS_FILE,
                        f"{label}: citation of "
                        f"support #{citation.support} does not match the cited bytes",
                    )
                )
    out.extend(check_answer_details(view))  # level details: an answer's details, again
    return out[:MAX_FINDINGS]


def _holds_read(record: EvidenceRecord, reads: dict[str, ResourceRead]) -> bool:
    """Whether ``record`` (kind ``resource``) holds its content item of its step's read."""
    read = reads.get(record.source.step)
    index = record.source.detail.get("index")
    if read is None or type(index) is not int:
        return False
    try:
        contents = read_contents(dict(read.result))
    except InputError:
        return False
    if not 0 <= index < len(contents):
        return False
    data, media_type, _ = contents[index]
    return digest(data) == record.digest and media_type == record.media_type


def check_evidence_digests(view: RunView) -> list[Finding] | None:
    """Each evidence file is registered, named by its SHA-256, sized and hashed as recorded."""
    if view.events is None:
        return None
    out: list[Finding] = []
    results = {e.call_id: e.result for e in view.events if isinstance(e, ToolReturned)}
    reads = {e.step: e for e in view.events if isinstance(e, ResourceRead)}
    stored = set(view.evidence.names())
    registered: set[str] = set()
    for event in view.events:
        if not isinstance(event, EvidenceRegistered):
            continue
        record = event.evidence
        name = record.digest.removeprefix("sha256:")
        registered.add(name)
        if name not in stored:
            out.append(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} is registered at event {event.idx} but missing",
                    event=event.idx,
                )
            )
            continue
        size, file_digest = view.evidence.size_and_digest(name)
        if (size, file_digest) != (record.size, record.digest):
            out.append(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} is {size} bytes with digest "
                    f"{file_digest}; event {event.idx} registered {record.size} bytes "
                    f"with {record.digest}",
                    event=event.idx,
                )
            )
            continue
        if record.source.kind == "resource" and not _holds_read(record, reads):
            out.append(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} does not hold content item "
                    f"{record.source.detail.get('index')} of the resource read at step "
                    f"{record.source.step!r}",
                    event=event.idx,
                )
            )
        result = results.get(record.source.call or "")
        if record.source.kind == "tool_result" and result is not None:
            try:
                expected, media_type = encode_value(result.value)
            except InputError:
                expected, media_type = b"", ""
            # the file's digest equals record.digest (checked above): compare digests,
            # so the file is not read again
            if digest(expected) != record.digest or media_type != record.media_type:
                out.append(
                    finding(
                        _CRIT,
                        record.path,
                        f"{record.path} does not hold the value returned by {record.source.call}",
                        event=event.idx,
                    )
                )
    for name in sorted(stored - registered):
        rel = view.evidence.path_of(name)
        size, file_digest = view.evidence.size_and_digest(name)
        name_ok = file_digest == digest_of_hex(name)
        why = "" if name_ok else " and its name is not its SHA-256"
        out.append(finding(_CRIT, rel, f"{rel} is not registered in the trace{why}"))
    return out[:MAX_FINDINGS]


def check_support_spans(view: RunView) -> list[Finding] | None:
    """Every support interval lies within its evidence file and hashes to its ``sha256``."""
    if view.claims is None:
        return None
    out: list[Finding] = []
    for claim in view.claims:
        for number, support in enumerate(claim.supports):
            rel = view.evidence.path_of(support.evidence)
            if support.evidence not in view.evidence:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number} cites {rel}, which is missing",
                    )
                )
                continue
            size = view.evidence.size(support.evidence)
            if support.end > size:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number} "
                        f"[{support.start}, {support.end}) is outside {rel} "
                        f"({size} bytes)",
                    )
                )
                continue
            data = view.evidence.read(support.evidence, support.start, support.end)
            if digest(data) != support.sha256:
                out.append(
                    finding(
                        _CRIT,
                        rel,
                        f"claim {claim.id} support #{number}: bytes "
                        f"[{support.start}, {support.end}) of {rel} do not hash to "
                        f"{support.sha256}",
                    )
                )
    return out[:MAX_FINDINGS]


def check_required_steps(view: RunView) -> list[Finding] | None:
    """Every plan node ran and finished; failed or skipped steps are reported with why."""
    if view.plan is None or view.events is None:
        return None
    out: list[Finding] = []
    finished = {e.step: e for e in view.events if isinstance(e, StepFinished)}
    for node in view.plan.nodes:
        if node.kind == StepKind.FINALIZE:
            continue
        event = finished.get(node.id)
        if event is None:
            out.append(
                finding(
                    Severity.ERROR,
                    TRACE_FILE,
                    f"plan step {node.id!r} never "
                    "finished; the run stopped early or the trace lost events",
                )
            )
        elif event.status != "ok":
            why = event.detail.get("reason") or event.detail.get("failure") or "no reason"
            out.append(
                finding(
                    Severity.WARNING,
                    TRACE_FILE,
                    f"step {node.id!r} {event.status}: {why}",
                    event=event.idx,
                )
            )
    return out[:MAX_FINDINGS]


def check_finalize(view: RunView) -> list[Finding] | None:
    """The trace ends with the finalize node, finished ok."""
    if view.events is None:
        return None
    events = view.events
    if (
        len(events) < 2
        or not isinstance(events[-2], StepStarted)
        or not isinstance(events[-1], StepFinished)
        or events[-1].step != "finalize"
        or events[-2].step != "finalize"
    ):
        return [
            finding(
                Severity.ERROR,
                TRACE_FILE,
                "the trace does not end with the "
                "finalize step: the run did not complete or events were removed",
            )
        ]
    if events[-1].status != "ok":
        return [
            finding(
                Severity.ERROR,
                TRACE_FILE,
                f"the run finalized as {events[-1].status}: {events[-1].detail.get('reason', '')}",
            )
        ]
    return []


def check_budget(view: RunView) -> list[Finding] | None:
    """Tool calls and evidence bytes stayed within the budgets; no budget stop recorded."""
    if view.spec is None or view.events is None:
        return None
    out: list[Finding] = []
    budgets = view.spec.budgets
    calls = sum(isinstance(e, ToolCalled) for e in view.events)
    sizes = {
        e.evidence.id: e.evidence.size for e in view.events if isinstance(e, EvidenceRegistered)
    }
    if budgets.tool_calls is not None and calls > budgets.tool_calls:
        out.append(
            finding(
                Severity.ERROR,
                TRACE_FILE,
                f"{calls} tool calls exceed the budget of {budgets.tool_calls}",
            )
        )
    total = sum(sizes.values())
    if budgets.evidence_bytes is not None and total > budgets.evidence_bytes:
        out.append(
            finding(
                Severity.ERROR,
                TRACE_FILE,
                f"{total} evidence bytes exceed the budget of {budgets.evidence_bytes}",
            )
        )
    for event in view.events:
        if isinstance(event, RunFailed):
            out.append(
                finding(
                    Severity.ERROR,
                    TRACE_FILE,
                    f"the run stopped at event {event.idx} ({event.reason}): {event.message}",
                    event=event.idx,
                )
            )
    return out
