"""An agent's answer and its quotes: each quote checked byte for byte in a recorded result.

Citation syntax in the answer text (what to ask a model for)::

    The README was added by Jane Doe "Initial commit" [call_2].

A quote is a double-quoted string immediately followed (spaces allowed) by
``[call_N]``: the ``N``-th recorded tool call of the session (from 1; step
``call-0000000N``), by ``[<model call id>]``: the call the agent's model gave that id
(``[pyd_ai_0e73...]``, ``[call_AbC...]``: the ``model_call_id`` of its ``tool_called``,
the one id a model ever sees), or by ``[read_N]``: the ``N``-th recorded resource read
(step ``read-0000000N``; the quote is looked for in each content item's bytes, in
order). A bracketed word that is none of these is text, not a citation. An id that
names two different calls (the model gave two calls one id, or a model's id reads as
another call's ``call_N``) resolves to neither: the quote is refused, both calls named.
Explicit citations (``session.answer(text, citations=[...])``) name the call by
``call`` (``"call_2"`` or a model call id) or by ``tool`` and ``occurrence`` (from 1),
or the read by ``read`` (``"read_1"``), and give the ``quote``.

The ``answer`` reasoner turns the answer into one claim: ``derived`` and
``validated`` when every quote occurs in its call's stored result bytes — byte-exact
(UTF-8), or with only whitespace runs differing (:func:`~toolproof.evidence.quotes.
locate_quote`; the support and the citation text are then the *original* bytes) —
each becoming a :class:`SupportRef` and a :class:`Citation`; ``derived`` and
``unvalidated`` when a quote is found nowhere (its ``reason`` names the quote and
the call: the ``grounding`` check fails the run), ``observed`` and ``unvalidated``
when the answer cites nothing.

A quote found only where the result repeats its call's own arguments (an echo) does
not validate, and a quote shorter than four characters validates nothing on its own
(:mod:`toolproof.evidence.echoes`): the claim is then ``derived`` and ``unvalidated``,
its reason naming the quote, the call and the rule.

The ``grounding`` parameter (:class:`~toolproof.evidence.grounding.Grounding`) sets
how far the claim is checked. At level ``details`` (what an agent session records
by default) a quote of fewer than ``min_quote_words`` words is short too, and every
detail (number with its unit, date, percentage, money amount, version) of a
sentence that carries a citation must occur in a result it cites
(:func:`~toolproof.evidence.grounding.check_details`): each found detail becomes a
support and a citation of its bytes, after the quotes' own; each missing one makes
the claim ``derived`` and ``unvalidated``, its reason naming the detail, the
sentence and the call. Without the parameter (a run recorded before grounding
levels) the level is ``quote``: the quotes only, as described above.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from toolproof.bundle.steps import numbered_step
from toolproof.contract.evidence import (
    Citation,
    Claim,
    ClaimStatus,
    ClaimType,
    EvidenceRecord,
    SupportRef,
)
from toolproof.errors import InputError
from toolproof.evidence.echoes import is_short, quote_problem
from toolproof.evidence.grounding import Cited, Grounding, check_details
from toolproof.evidence.quotes import locate_quote
from toolproof.evidence.reasoners import Reasoner, ReasonerRequest, StepOutput

__all__ = [
    "CITATION_RE",
    "AnswerReasoner",
    "QuoteCitation",
    "citation_step",
    "inline_spans",
    "model_calls_of",
    "parse_citations",
    "step_of",
]

CITATION_RE = re.compile(r'"([^"\n]+)"\s*\[([A-Za-z0-9][A-Za-z0-9_.:\-]*)\]')
"""``"quote" [id]`` in an answer's text: ``call_N``, ``read_N`` or a model call id."""
_NUMBERED_RE = re.compile(r"(call|read)_[1-9][0-9]*")


class QuoteCitation(BaseModel):
    """One quote an answer attributes to a recorded call.

    Attributes:
        call: ``call_N`` (the N-th recorded call, from 1), or ``None`` with ``tool``
            or ``read``.
        tool: the tool name, with ``occurrence`` (its N-th call, from 1).
        read: ``read_N``: the N-th recorded resource read (from 1).
        occurrence: which call of ``tool``.
        quote: the exact text quoted.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    call: str | None = None
    tool: str | None = None
    read: str | None = None
    occurrence: int = 1
    quote: str


def step_of(call: str, kind: str = "call") -> str:
    """The step id of ``call_N``: ``call-0000000N`` (of ``read_N``, with ``kind="read"``).

    Raises:
        InputError: not ``<kind>_N`` with N >= 1.

    """
    match = re.fullmatch(rf"{kind}_([1-9][0-9]*)", call)
    if match is None:
        raise InputError(f"citation {kind} {call!r}: expected {kind}_N with N >= 1", **{kind: call})
    return numbered_step(kind, int(match.group(1)))


def parse_citations(text: str, model_ids: Collection[str] = ()) -> list[QuoteCitation]:
    """The quotes of an answer in the inline syntax ``"quote" [call_N]``, ``[read_N]``, ``[id]``.

    Args:
        text: the answer.
        model_ids: the ids the agent's model gave the recorded calls; ``"quote" [id]``
            cites a call by one of them (a ``call`` citation holding the id).

    Returns:
        The citations in text order; a bracketed word that is neither ``call_N``,
        ``read_N`` nor one of ``model_ids`` is not a citation.

    """
    out = []
    for match in CITATION_RE.finditer(text):
        quote, named = match.group(1), match.group(2)
        numbered = _NUMBERED_RE.fullmatch(named)
        if numbered is not None:
            out.append(QuoteCitation.model_validate({numbered.group(1): named, "quote": quote}))
        elif named in model_ids:
            out.append(QuoteCitation(call=named, quote=quote))
    return out


def _call_name(step: str) -> str:
    """``call_N`` of step ``call-0000000N`` (another step: itself)."""
    match = re.fullmatch(r"call-0*([1-9][0-9]*)", step)
    return f"call_{match.group(1)}" if match is not None else step


def inline_spans(text: str, model_ids: Collection[str] = ()) -> list[tuple[int, int]]:
    """The ``[start, end)`` character spans of the inline citations of ``text``.

    In the order (and number) of :func:`parse_citations` given the same ``model_ids``:
    from the opening quote mark to the closing bracket of ``[call_N]`` (or ``[id]``).
    """
    return [
        found.span()
        for found in CITATION_RE.finditer(text)
        if _NUMBERED_RE.fullmatch(found.group(2)) or found.group(2) in model_ids
    ]


def citation_label(citation: QuoteCitation) -> str:
    """How a reason names what ``citation`` cites: ``call_2``, ``read_1`` or ``tool#2``."""
    return citation.read or citation.call or f"{citation.tool}#{citation.occurrence}"


def _call_step(named: str, model_calls: dict[str, list[str]]) -> str:
    """The step of the one call ``named`` (``call_N`` or a model call id) names.

    Raises:
        InputError: it names no call, or two different calls (both named).

    """
    steps = list(dict.fromkeys(model_calls.get(named, [])))
    if _NUMBERED_RE.fullmatch(named) and named.startswith("call_"):
        own = step_of(named)
        if own not in steps:
            steps.insert(0, own)
    if not steps:
        raise InputError(f"citation [{named}] names no recorded call", call=named)
    if len(steps) > 1:
        both = " and ".join(f"{_call_name(step)} (step {step})" for step in steps)
        raise InputError(
            f"citation [{named}] names {len(steps)} different calls: {both}; cite one "
            "of them by its call_N",
            call=named,
        )
    return steps[0]


def citation_step(
    citation: QuoteCitation, calls: list[str], model_calls: dict[str, list[str]] | None = None
) -> str | None:
    """The step ``citation`` cites, or ``None`` when its tool has no such occurrence.

    Args:
        citation: one quote's citation.
        calls: the tool name of each recorded call, in order (for ``tool`` citations).
        model_calls: the steps of the calls the agent's model gave each id
            (:func:`model_calls_of`), for a ``call`` citation by such an id.

    Raises:
        InputError: a malformed ``read_N``; a ``call`` that names no recorded call, or
            two different calls (the model gave two calls that id, or it is another
            call's ``call_N``): the message names both.

    """
    if citation.read is not None:
        return step_of(citation.read, "read")
    if citation.call is not None:
        return _call_step(citation.call, model_calls or {})
    seen = 0
    for number, tool in enumerate(calls, start=1):
        if tool == citation.tool:
            seen += 1
            if seen == citation.occurrence:
                return numbered_step("call", number)
    return None


def model_calls_of(pairs: Iterable[tuple[str, str | None]]) -> dict[str, list[str]]:
    """The steps of the calls the agent's model gave each id, from ``(step, id)`` pairs.

    Args:
        pairs: each call step and the ``model_call_id`` recorded for it (``None``: none),
            in any order.

    Returns:
        ``{model call id: [steps, sorted]}``.

    """
    out: dict[str, list[str]] = {}
    for step, model_id in sorted(pairs, key=lambda pair: pair[0]):
        if model_id is not None:
            out.setdefault(model_id, []).append(step)
    return out


class AnswerReasoner(Reasoner):
    """``answer``: the claim of an agent's final answer, its quotes checked byte-exact.

    Params: ``answer`` (the text) and ``citations`` (a list of :class:`QuoteCitation`
    objects as JSON; empty: taken from the text's inline syntax). ``tool`` citations
    are resolved against ``calls``, the tool name of each recorded call in order; a
    citation by a model call id against the ``model_call_id`` of each call step's output
    (:attr:`~toolproof.evidence.reasoners.StepOutput.model_call_id`).
    ``grounding``: ``{"level", "min_quote_words"}`` (absent: level ``quote``).
    """

    name = "answer"
    version = "1"

    def check_params(self, params: dict[str, Any]) -> None:
        """Check ``answer`` (str), ``citations`` (list) and ``calls`` (list of tool names).

        Raises:
            InputError: a missing or malformed parameter.

        """
        unknown = sorted(set(params) - {"answer", "citations", "calls", "grounding"})
        if unknown or not isinstance(params.get("answer"), str):
            raise InputError(
                f"reasoner 'answer' takes answer (a string), citations, calls and grounding "
                f"(got {sorted(params)})",
                reasoner=self.name,
            )
        self.grounding = Grounding.from_params(params.get("grounding"))
        try:
            self.citations = [QuoteCitation.model_validate(c) for c in params.get("citations", [])]
        except ValidationError as exc:
            raise InputError(f"reasoner 'answer': bad citation: {exc}", reasoner=self.name) from exc
        self.calls = [str(name) for name in params.get("calls", [])]
        self.model_calls: dict[str, list[str]] = {}

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """One claim for the answer; see the module docstring."""
        text = str(self.spec.params["answer"])
        self.model_calls = model_calls_of(
            (done.step, done.model_call_id) for done in request.outputs.values()
        )
        citations = self.citations or parse_citations(text, self.model_calls)
        if not citations:
            return [
                Claim(
                    statement=text,
                    type=ClaimType.OBSERVED,
                    status=ClaimStatus.UNVALIDATED,
                    reasoner=self.name,
                    reason="the answer quotes no tool result",
                )
            ]
        supports: list[SupportRef] = []
        quoted: list[Citation] = []
        missing: list[str] = []
        short: list[str] = []
        full = 0
        for citation in citations:
            label = citation_label(citation)
            try:
                found = self._cited(citation, request)
            except InputError as refused:
                missing.append(f"quote {citation.quote!r}: {refused.message}")
                continue
            if found is None:
                missing.append(f"quote {citation.quote!r}: {label} returned no result to quote")
                continue
            output, records = found
            match, record, data = None, records[0], b""
            for record in records:
                data = request.store.read(record.id)
                match = locate_quote(data, citation.quote)
                if match is not None:
                    break
            if match is None:
                missing.append(f"quote {citation.quote!r} is not in the result of {label}")
                continue
            original = data[match.start : match.end].decode("utf-8")
            problem = quote_problem(original, output.arguments)
            if problem is not None and not is_short(original):  # an echo: no support at all
                missing.append(f"quote {citation.quote!r} in the result of {label}: {problem}")
                continue
            problem = problem or self.grounding.quote_problem(original)
            if problem is not None:
                short.append(f"quote {citation.quote!r} in the result of {label}: {problem}")
            else:
                full += 1
            quoted.append(Citation(support=len(supports), text=original))
            supports.append(request.store.support(record.id, match.start, match.end))
        if not missing and not full:  # only short quotes: none validates on its own
            missing = short
        if self.grounding.level == "details":
            missing += self._details(text, citations, request, supports, quoted)
        if missing:
            return [
                Claim(
                    statement=text,
                    type=ClaimType.DERIVED,
                    status=ClaimStatus.UNVALIDATED,
                    supports=supports,
                    citations=quoted,
                    reasoner=self.name,
                    reason="; ".join(missing),
                )
            ]
        return [
            Claim(
                statement=text,
                type=ClaimType.DERIVED,
                status=ClaimStatus.VALIDATED,
                supports=supports,
                citations=quoted,
                reasoner=self.name,
            )
        ]

    def _cited(
        self, citation: QuoteCitation, request: ReasonerRequest
    ) -> tuple[StepOutput, tuple[EvidenceRecord, ...]] | None:
        """The output ``citation`` cites and the records it may quote (``None``: no result).

        Raises :class:`InputError` as :func:`citation_step` does.
        """
        output = request.outputs.get(citation_step(citation, self.calls, self.model_calls) or "")
        if output is None or not output.ok or not output.evidence:
            return None
        # a call's value is its first record; a read's contents are each one
        return output, output.evidence if citation.read is not None else output.evidence[:1]

    def _details(
        self,
        text: str,
        citations: list[QuoteCitation],
        request: ReasonerRequest,
        supports: list[SupportRef],
        quoted: list[Citation],
    ) -> list[str]:
        """Check the details of the cited sentences; add a support per found one.

        Returns:
            The reason of each detail not found, in the text's order.

        """
        inline = not self.citations
        protected = inline_spans(text, self.model_calls) if inline else []
        places: list[int | None] = (
            [start for start, _ in protected] if inline else [None] * len(citations)
        )
        cited = []
        for citation, at in zip(citations, places, strict=True):
            try:
                found = self._cited(citation, request)
            except InputError:  # refused, and said so, with the quotes
                found = None
            records = found[1] if found is not None else ()
            evidence = tuple((record.id, request.store.read(record.id)) for record in records)
            cited.append(Cited(citation_label(citation), at, evidence))
        problems: list[str] = []
        spans = {(s.evidence, s.start, s.end) for s in supports}
        for check in check_details(text, cited, protected):
            if check.found is None or check.evidence is None:
                problems.append(str(check.problem))
                continue
            span = (check.evidence, check.found.start, check.found.end)
            if span in spans:
                continue
            spans.add(span)
            data = request.store.read(check.evidence)[check.found.start : check.found.end]
            quoted.append(Citation(support=len(supports), text=data.decode("utf-8")))
            supports.append(request.store.support(*span))
        return problems
