"""Provenance checks: grounding, evidence digests, spans, completeness, finalize, budget."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from toolproof.bundle.trace import TraceLine
from toolproof.contract.evidence import ClaimStatus, ClaimType, EvidenceRecord
from toolproof.contract.layout import CLAIMS_FILE, TRACE_FILE
from toolproof.contract.runs import Finding, Severity, StepKind
from toolproof.contract.tools import ToolResult
from toolproof.contract.trace import (
    EvidenceRegistered,
    ResourceRead,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from toolproof.errors import InputError, VerificationError
from toolproof.evidence.encoding import encode_value, read_contents
from toolproof.identity import digest, digest_of_hex
from toolproof.verify.answers import check_answer_details
from toolproof.verify.base import (
    MAX_FINDINGS,
    Findings,
    KeySet,
    TraceState,
    compact_key,
    finding,
    stream_check,
)
from toolproof.verify.view import RunView

__all__ = [
    "STREAMS",
    "check_budget",
    "check_evidence_digests",
    "check_finalize",
    "check_grounding",
    "check_required_steps",
]

_CRIT = Severity.CRITICAL


def _span(view: RunView, evidence: str, start: int, end: int) -> bytes | None:
    """The cited bytes, or ``None`` when the evidence is missing or damaged (see its checks)."""
    try:
        if evidence not in view.evidence:
            return None
        return view.evidence.read(evidence, start, end)
    except VerificationError:
        return None


def check_grounding(view: RunView) -> list[Finding] | None:
    """A validated claim is derived, has ``min_supports`` supports, and quotes them exactly.

    An agent's answer at grounding level ``details`` is also derived again from the
    spec and the stored bytes (:mod:`toolproof.verify.answers`).
    """
    if view.claims is None or view.spec_head is None:
        return None
    out: list[Finding] = []
    minimum = view.spec_head.reasoner.min_supports
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


def _read_items(read: ResourceRead) -> list[tuple[str, str]] | None:
    """The digest and media type of each content item of a resource read (``None``: bad)."""
    try:
        contents = read_contents(dict(read.result))
    except InputError:
        return None
    return [(digest(data), media_type) for data, media_type, _ in contents]


def _holds_read(record: EvidenceRecord, items: list[tuple[str, str]] | None) -> bool:
    """Whether ``record`` (kind ``resource``) holds its content item of its step's read."""
    index = record.source.detail.get("index")
    if items is None or type(index) is not int:
        return False
    if not 0 <= index < len(items):
        return False
    return items[index] == (record.digest, record.media_type)


def _value_of(result: ToolResult) -> tuple[bytes, str]:
    """The raw SHA-256 and media type of the evidence bytes of a returned value.

    Raw (32 bytes), not ``sha256:<hex>``: one is kept per returned call.
    """
    try:
        expected, media_type = encode_value(result.value)
    except InputError:
        expected, media_type = b"", ""
    return hashlib.sha256(expected).digest(), media_type


class _EvidenceDigests:
    """``evidence-digests``: every registered file against the manifest's digests.

    Keeps, per returned call of the open step (a tool result's evidence is registered
    in its call's step), the raw digest and media type of its value's evidence bytes;
    per resource read, its items' digests; the stored items registered (a
    :class:`~toolproof.verify.base.KeySet`, about 70 bytes an item). The stored items
    themselves are read twice, never held: checked whole when the state is built
    (``RunEvidence.items``), their names walked again at the end for those never
    registered. Evidence that names a call (or a read) before it returns is judged
    when the result comes (or at the end, against nothing, as before).
    """

    def __init__(self, view: RunView) -> None:
        self.view = view
        self.out = Findings()
        # every stored item read once, in storage order (a packed run's pack and index
        # checked whole: a damaged one is this check's one finding)
        self.registered = KeySet()
        self.damaged: Finding | None = None
        try:
            for _ in view.evidence.items():
                pass
        except VerificationError as exc:
            self.damaged = finding(_CRIT, exc.file or TRACE_FILE, exc.message)
        self.values: dict[str, tuple[bytes, str]] = {}  # the open step's calls: value
        self.reads: dict[str, list[tuple[str, str]] | None] = {}
        self.early: dict[str, list[EvidenceRegistered]] = {}
        self.early_reads: dict[str, list[EvidenceRegistered]] = {}

    def feed(self, line: TraceLine) -> None:
        event = line.event
        if isinstance(event, StepStarted):
            self.values.clear()
            self.early.clear()  # named calls that never returned in their step
        elif isinstance(event, ToolReturned):
            value = self.values[event.call_id] = _value_of(event.result)
            for waiting in self.early.pop(event.call_id, ()):
                self._compare_value(waiting, value)
        elif isinstance(event, ResourceRead):
            items = self.reads[event.step] = _read_items(event)
            for waiting in self.early_reads.pop(event.step, ()):
                self._compare_read(waiting, items)
        elif isinstance(event, EvidenceRegistered):
            self._registered(event)

    def _registered(self, event: EvidenceRegistered) -> None:
        record, out = event.evidence, self.out
        name = record.digest.removeprefix("sha256:")
        if self.damaged is not None:
            return
        if name not in self.view.evidence:
            out.add(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} is registered at event {event.idx} but missing",
                    event=event.idx,
                )
            )
            return
        self.registered.add(name)
        size, file_digest = self.view.evidence.size_and_digest(name)
        if (size, file_digest) != (record.size, record.digest):
            out.add(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} is {size} bytes with digest "
                    f"{file_digest}; event {event.idx} registered {record.size} bytes "
                    f"with {record.digest}",
                    event=event.idx,
                )
            )
            return
        source = record.source
        if source.kind == "resource":
            if source.step in self.reads:
                self._compare_read(event, self.reads[source.step])
            else:
                self.early_reads.setdefault(source.step, []).append(event)
        if source.kind == "tool_result":
            call = source.call or ""
            value = self.values.get(call)
            if value is not None:
                self._compare_value(event, value)
            else:
                self.early.setdefault(call, []).append(event)

    def _compare_read(self, event: EvidenceRegistered, items: list[tuple[str, str]] | None) -> None:
        record = event.evidence
        if not _holds_read(record, items):
            self.out.add(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} does not hold content item "
                    f"{record.source.detail.get('index')} of the resource read at step "
                    f"{record.source.step!r}",
                    event=event.idx,
                )
            )

    def _compare_value(self, event: EvidenceRegistered, value: tuple[bytes, str]) -> None:
        # the file's digest equals record.digest (checked before): compare digests,
        # so the file is not read again
        record = event.evidence
        if (digest_of_hex(value[0].hex()), value[1]) != (record.digest, record.media_type):
            self.out.add(
                finding(
                    _CRIT,
                    record.path,
                    f"{record.path} does not hold the value returned by {record.source.call}",
                    event=event.idx,
                )
            )

    def finish(self) -> list[Finding]:
        if self.damaged is not None:
            return [self.damaged]
        for events in self.early_reads.values():
            for event in events:
                self._compare_read(event, None)
        out = self.out
        for name in self.view.evidence.each_name():  # sorted
            if name in self.registered:
                continue
            if len(out) >= MAX_FINDINGS:
                break  # no more are kept: nothing more to read
            rel = self.view.evidence.path_of(name)
            _, file_digest = self.view.evidence.size_and_digest(name)
            name_ok = file_digest == digest_of_hex(name)
            why = "" if name_ok else " and its name is not its SHA-256"
            out.add(finding(_CRIT, rel, f"{rel} is not registered in the trace{why}"))
        return out[:MAX_FINDINGS]


def check_evidence_digests(view: RunView) -> list[Finding] | None:
    """Each evidence item is registered, named by its SHA-256, sized and hashed as recorded.

    Every stored item is read once, in storage order (``RunEvidence.items``); a damaged
    pack or index is one critical finding naming the file, the byte offset and the rule.
    """
    return stream_check(view, _EvidenceDigests)


class _RequiredSteps:
    """``required-steps``: the last ``step_finished`` of each plan node.

    One byte per node (its position from :attr:`RunView.plan_index`), plus the event of
    each node whose last finish was not ``ok``; the nodes' ids are read again from
    ``plan.json`` only when one did not finish ok.
    """

    def __init__(self, view: RunView) -> None:
        assert view.plan_index is not None
        self.view = view
        self.index = view.plan_index
        self.state = bytearray(view.plan_size)  # 0: never finished, 1: ok, 2: not ok
        self.not_ok: dict[int, StepFinished] = {}

    def feed(self, line: TraceLine) -> None:
        event = line.event
        if isinstance(event, StepFinished):
            number = self.index.get(compact_key(event.step))
            if number is None:
                return
            if event.status == "ok":
                self.state[number] = 1
                self.not_ok.pop(number, None)
            else:
                self.state[number] = 2
                self.not_ok[number] = event

    def finish(self) -> list[Finding]:
        out = Findings()
        skip = self.view.plan_finalize
        if all(state == 1 for at, state in enumerate(self.state) if at not in skip):
            return out
        for _, _, node in self.view.plan_parts():
            if isinstance(node, list) or node.kind == StepKind.FINALIZE:
                continue
            number = self.index[compact_key(node.id)]  # a node id listed twice shares one slot
            state = self.state[number]
            if state == 0:
                out.add(
                    finding(
                        Severity.ERROR,
                        TRACE_FILE,
                        f"plan step {node.id!r} never "
                        "finished; the run stopped early or the trace lost events",
                    )
                )
            elif state == 2:
                event = self.not_ok[number]
                why = event.detail.get("reason") or event.detail.get("failure") or "no reason"
                out.add(
                    finding(
                        Severity.WARNING,
                        TRACE_FILE,
                        f"step {node.id!r} {event.status}: {why}",
                        event=event.idx,
                    )
                )
        return out[:MAX_FINDINGS]


def _required(view: RunView) -> _RequiredSteps | None:
    return _RequiredSteps(view) if view.plan_index is not None else None


def check_required_steps(view: RunView) -> list[Finding] | None:
    """Every plan node ran and finished; failed or skipped steps are reported with why."""
    return stream_check(view, _required)


class _Finalize:
    """``finalize``: keeps the last two events."""

    def __init__(self, view: RunView) -> None:
        self.before: TraceEvent | None = None
        self.last: TraceEvent | None = None

    def feed(self, line: TraceLine) -> None:
        self.before, self.last = self.last, line.event

    def finish(self) -> list[Finding]:
        events = [event for event in (self.before, self.last) if event is not None]
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
                    f"the run finalized as {events[-1].status}: "
                    f"{events[-1].detail.get('reason', '')}",
                )
            ]
        return []


def check_finalize(view: RunView) -> list[Finding] | None:
    """The trace ends with the finalize node, finished ok."""
    return stream_check(view, _Finalize)


class _Budget:
    """``budget``: counts calls; keeps each evidence id's size (the last registered).

    The sizes only under an ``evidence_bytes`` budget (by
    :func:`~toolproof.verify.base.compact_key` of the id: about 110 bytes an item).
    """

    def __init__(self, view: RunView) -> None:
        assert view.spec_head is not None
        self.budgets = view.spec_head.budgets
        self.calls = 0
        self.sizes: dict[int, int] | None = None if self.budgets.evidence_bytes is None else {}
        self.stops: list[Finding] = []

    def feed(self, line: TraceLine) -> None:
        event = line.event
        if isinstance(event, ToolCalled):
            self.calls += 1
        elif isinstance(event, EvidenceRegistered) and self.sizes is not None:
            self.sizes[compact_key(event.evidence.id)] = event.evidence.size
        elif isinstance(event, RunFailed):
            self.stops.append(
                finding(
                    Severity.ERROR,
                    TRACE_FILE,
                    f"the run stopped at event {event.idx} ({event.reason}): {event.message}",
                    event=event.idx,
                )
            )

    def finish(self) -> list[Finding]:
        out: list[Finding] = []
        budgets, calls = self.budgets, self.calls
        if budgets.tool_calls is not None and calls > budgets.tool_calls:
            out.append(
                finding(
                    Severity.ERROR,
                    TRACE_FILE,
                    f"{calls} tool calls exceed the budget of {budgets.tool_calls}",
                )
            )
        total = sum(self.sizes.values()) if self.sizes is not None else 0
        if budgets.evidence_bytes is not None and total > budgets.evidence_bytes:
            out.append(
                finding(
                    Severity.ERROR,
                    TRACE_FILE,
                    f"{total} evidence bytes exceed the budget of {budgets.evidence_bytes}",
                )
            )
        return out + self.stops


def _budget(view: RunView) -> _Budget | None:
    return _Budget(view) if view.spec_head is not None else None


def check_budget(view: RunView) -> list[Finding] | None:
    """Tool calls and evidence bytes stayed within the budgets; no budget stop recorded."""
    return stream_check(view, _budget)


STREAMS: dict[str, Callable[[RunView], TraceState | None]] = {
    "evidence-digests": _EvidenceDigests,
    "required-steps": _required,
    "finalize": _Finalize,
    "budget": _budget,
}
"""The trace states of this module's checks, by check id."""
