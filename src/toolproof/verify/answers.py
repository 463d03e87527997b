"""An agent's answer's details, re-checked offline from the stored bytes (in ``grounding``).

A run whose reasoner is ``answer`` at grounding level ``details`` (its spec's
``reasoner.params.grounding``) states in ``spec.json`` everything its claim was
derived from: the answer text, its citations and the tool name of each call (and the
trace, the id the agent's model gave each call). This
check derives the details again from those and from the stored evidence bytes
(:func:`toolproof.evidence.grounding.check_details`, the reasoner's own code) and
compares the claim with what it finds, so a ``claims.json`` written by a different
reasoner, or edited and re-sealed, cannot pass:

* a detail not in what its sentence cites: the claim must not be ``validated``, and
  its reason must say so (the same words the reasoner writes);
* a detail found: the claim has a support at exactly its bytes;
* every support of the claim is the span of one of its quotes (located again) or of
  one of its found details; anything else is a forged support.

A run at level ``quote`` (or recorded before grounding levels) is checked as before.
The evidence each citation points at is read from the trace in one more pass that
keeps only the cited steps' evidence ids (bounded memory, like the streaming checks).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from toolproof.bundle.trace import TraceLine
from toolproof.contract.evidence import Claim, ClaimStatus
from toolproof.contract.layout import CLAIMS_FILE, SPEC_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.trace import EvidenceRegistered, ToolCalled
from toolproof.errors import InputError
from toolproof.evidence.answer import (
    CITATION_RE,
    QuoteCitation,
    citation_label,
    citation_step,
    inline_spans,
    model_calls_of,
    parse_citations,
)
from toolproof.evidence.grounding import Cited, DetailCheck, Grounding, check_details
from toolproof.evidence.quotes import locate_quote
from toolproof.verify.base import finding
from toolproof.verify.view import RunView

__all__ = ["check_answer_details"]

_Span = tuple[str, int, int]


def _results(view: RunView, steps: set[str]) -> dict[str, list[str]] | None:
    """The result evidence ids of each of ``steps``, in registration order.

    One pass over the trace that keeps only those ids (a call's value; a read's
    items), so memory does not grow with the trace; ``None`` when a trace line is not
    a valid event (the ``schema`` check reports it).
    """
    out: dict[str, list[str]] = {}

    def take(line: TraceLine) -> None:
        event = line.event
        if not isinstance(event, EvidenceRegistered):
            return
        source = event.evidence.source
        if source.step in steps and source.kind in ("tool_result", "resource"):
            out.setdefault(source.step, []).append(event.evidence.id)

    view.scan([take])
    return out if view.trace_ok else None


def _model_calls(view: RunView, named: set[str]) -> dict[str, list[str]] | None:
    """The steps of the calls the agent's model gave one of the ids in ``named``.

    One pass over the trace keeping only those calls; ``None`` when a trace line is not
    a valid event (the ``schema`` check reports it).
    """
    pairs: list[tuple[str, str | None]] = []

    def take(line: TraceLine) -> None:
        event = line.event
        if isinstance(event, ToolCalled) and event.model_call_id in named:
            pairs.append((event.step, event.model_call_id))

    view.scan([take])
    return model_calls_of(pairs) if view.trace_ok else None


def _step(citation: QuoteCitation, calls: list[str], model_calls: dict[str, list[str]]) -> str:
    """The step ``citation`` cites; ``""`` when it names none, or two (it cites no bytes)."""
    try:
        return citation_step(citation, calls, model_calls) or ""
    except InputError:
        return ""


def _cited(
    view: RunView, params: dict[str, Any]
) -> tuple[str, list[QuoteCitation], list[Cited], list[tuple[int, int]]] | None:
    """The answer, its citations, each with the bytes it points at, and the inline spans."""
    text = str(params.get("answer", ""))
    explicit = [QuoteCitation.model_validate(c) for c in params.get("citations") or []]
    named = {c.call for c in explicit if c.call} | {m.group(2) for m in CITATION_RE.finditer(text)}
    model_calls = _model_calls(view, named) if named else {}
    if model_calls is None:
        return None
    citations = explicit or parse_citations(text, model_calls)
    protected = [] if explicit else inline_spans(text, model_calls)
    places: list[int | None] = [None] * len(citations) if explicit else [a for a, _ in protected]
    calls = [str(name) for name in params.get("calls") or []]
    steps = [_step(citation, calls, model_calls) for citation in citations]
    results = _results(view, set(steps)) if citations else {}
    if results is None:
        return None
    cited = []
    for citation, at, step in zip(citations, places, steps, strict=True):
        ids = results.get(step, [])
        ids = ids if citation.read is not None else ids[:1]
        stored = tuple((key, view.evidence.read(key)) for key in ids if key in view.evidence)
        cited.append(Cited(citation_label(citation), at, stored))
    return text, citations, cited, protected


def _quote_spans(citations: list[QuoteCitation], cited: list[Cited]) -> set[_Span]:
    """Where each quote is located again (the first item of a read that holds it)."""
    spans: set[_Span] = set()
    for citation, where in zip(citations, cited, strict=True):
        for key, data in where.evidence:
            match = locate_quote(data, citation.quote)
            if match is not None:
                spans.add((key, match.start, match.end))
                break
    return spans


def _judge(claim: Claim, checks: list[DetailCheck], quotes: set[_Span]) -> list[Finding]:
    label = f"claim {claim.id} ({claim.statement[:60]!r})"
    held = [(s.evidence, s.start, s.end) for s in claim.supports]
    found: set[_Span] = set()
    out = []
    for check in checks:
        if check.found is None or check.evidence is None:
            problem = str(check.problem)
            if claim.status == ClaimStatus.VALIDATED:
                message = f"{label} is validated, but {problem}"
                out.append(finding(Severity.ERROR, CLAIMS_FILE, message))
            elif problem not in claim.reason:
                message = f"{label} does not give the reason: {problem}"
                out.append(finding(Severity.ERROR, CLAIMS_FILE, message))
            continue
        span = (check.evidence, check.found.start, check.found.end)
        found.add(span)
        if span not in held:
            out.append(
                finding(
                    Severity.ERROR,
                    CLAIMS_FILE,
                    f"{label} has no support for detail {check.detail.text!r} "
                    f"({check.detail.normal}), found at [{span[1]}, {span[2]}) of {span[0]} "
                    f"in the result of {check.label}",
                )
            )
    for number, span in enumerate(held):
        if span not in found and span not in quotes:
            out.append(
                finding(
                    Severity.ERROR,
                    CLAIMS_FILE,
                    f"{label} support #{number} [{span[1]}, {span[2]}) of {span[0]} is "
                    "neither where one of its quotes is nor a detail of a cited sentence",
                )
            )
    return out


def check_answer_details(view: RunView) -> list[Finding]:
    """The findings of an answer claim's details at level ``details`` (see the module)."""
    spec = view.spec_head  # the reasoner is in the head; the steps are not read
    if spec is None or spec.reasoner.name != "answer" or view.claims is None:
        return []
    params = dict(spec.reasoner.params)
    try:
        grounding = Grounding.from_params(params.get("grounding"))
        if grounding.level != "details":
            return []
        derived = _cited(view, params)
    except (InputError, ValidationError) as exc:
        message = f"the answer reasoner's parameters cannot be re-checked: {exc}"
        return [finding(Severity.ERROR, SPEC_FILE, message)]
    if derived is None:
        return []
    text, citations, cited, protected = derived
    checks = check_details(text, cited, protected)
    quotes = _quote_spans(citations, cited)
    out: list[Finding] = []
    for claim in view.claims:
        if claim.reasoner == "answer":
            out.extend(_judge(claim, checks, quotes))
    return out
