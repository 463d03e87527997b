"""Grounding beyond the verbatim quote: the details of a cited sentence must be in what it cites.

An answer's quote proves that some words occur in a tool result; it does not prove
the rest of the sentence. At grounding level ``details`` (the default for agent
answers, docs/grounding.md) every detail (:mod:`toolproof.evidence.details`: a
number with its unit, a date, a percentage, a money amount, a version) of a
sentence that carries a citation must occur, in normal form, in the bytes of a
result that sentence cites; and a quote of fewer than ``min_quote_words`` words
supports nothing on its own. Level ``quote`` checks the quotes only.

* **Sentences.** The answer is split after ``.``, ``!`` or ``?`` (closing quotes or
  brackets may follow) when whitespace and then no lower-case letter come next, and
  not after a listed abbreviation or a single letter (``e.g.``, ``Dr.``, ``J.``);
  at a blank line; and before a line that starts a list item (``-``, ``*``, ``•``,
  ``1.``). An inline citation (``"quote" [call_N]``) is never split.
* **Which citation a sentence carries.** An inline citation belongs to the sentence
  it stands in (a sentence that is nothing but citations belongs to the one before
  it); explicit citations (``session.answer(text, citations=[...])``)
  name no place in the text, so every sentence carries all of them.
* **Where a detail must be.** In the stored bytes of any result the sentence
  cites (a call's value; each content item of a read), found there by the same
  extractor and compared by :func:`~toolproof.evidence.details.supported_by`.
  Citation markers (``[call_2]``) are not details, nor the words of an inline
  quote (``"..." [call_N]``): the quote itself must occur in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import regex

from toolproof.errors import InputError
from toolproof.evidence.details import Detail, details_in_bytes, extract_details, supported_by

__all__ = [
    "DEFAULT_MIN_QUOTE_WORDS",
    "DETAIL_RULE",
    "GROUNDING_LEVELS",
    "Cited",
    "DetailCheck",
    "Grounding",
    "check_details",
    "sentence_spans",
    "words_rule",
]

GROUNDING_LEVELS = ("quote", "details")
"""The grounding levels, weakest first."""

DEFAULT_MIN_QUOTE_WORDS = 3
"""At level ``details``, the fewest words a quote that validates on its own has."""

DETAIL_RULE = (
    "every number, date, percentage and money amount of a cited sentence occurs in a "
    "result it cites"
)
"""The detail rule, as a failure reason names it."""

_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "approx", "no", "nos", "mr", "mrs", "ms", "dr", "prof"}
    | {"sr", "jr", "st", "inc", "ltd", "co", "corp", "fig", "eq", "cf", "al"}
)
_BOUNDARY = regex.compile(
    r"(?P<stop>[.!?]+)[\"'\u201d\u2019)\]]*\s+(?=[^\s\p{Ll}])"
    r"|\n[ \t]*\n\s*"
    r"|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)"
)
_MARKER = regex.compile(r"\[(?:call|read)_[0-9]+\]")
_WORD = regex.compile(r"\S+")
_WORDY = regex.compile(r"[\p{L}\p{N}]")


def words_rule(minimum: int) -> str:
    """The short-quote rule of level ``details``, as a failure reason names it."""
    return f"a quote shorter than {minimum} words supports nothing on its own"


@dataclass(frozen=True)
class Grounding:
    """How far an answer's claim is checked: ``[grounding]`` in ``toolproof.toml``.

    Attributes:
        level: ``quote`` (each quote must occur in the result it cites) or ``details``
            (that, and every detail of a cited sentence must occur in a result it
            cites, and a quote of fewer than ``min_quote_words`` words supports
            nothing on its own).
        min_quote_words: the fewest words (whitespace-separated) a quote that validates
            on its own has, at level ``details``; 1 to 100.

    """

    level: Literal["quote", "details"] = "details"
    min_quote_words: int = DEFAULT_MIN_QUOTE_WORDS

    def __post_init__(self) -> None:
        """Check the level and the minimum.

        Raises:
            InputError: an unknown level, or a minimum outside 1..100.

        """
        if self.level not in GROUNDING_LEVELS:
            raise InputError(
                f"grounding level {self.level!r}: expected one of {', '.join(GROUNDING_LEVELS)}",
                rule="grounding level",
            )
        if type(self.min_quote_words) is not int or not 1 <= self.min_quote_words <= 100:
            raise InputError(
                f"grounding min_quote_words {self.min_quote_words!r}: expected an integer "
                "from 1 to 100",
                rule="grounding min_quote_words",
            )

    @classmethod
    def from_params(cls, raw: Any) -> Grounding:
        """The grounding a reasoner's ``grounding`` parameter names.

        Args:
            raw: ``{"level": ..., "min_quote_words": ...}`` as :meth:`to_params` writes
                it, or ``None``: a run recorded before grounding levels, checked as it
                was then (level ``quote``).

        Raises:
            InputError: not such an object, or bad values.

        """
        if raw is None:
            return cls(level="quote")
        if not isinstance(raw, dict) or set(raw) - {"level", "min_quote_words"}:
            raise InputError(
                f"grounding {raw!r}: expected an object with level and min_quote_words",
                rule="grounding",
            )
        return cls(
            level=raw.get("level", "details"),
            min_quote_words=raw.get("min_quote_words", DEFAULT_MIN_QUOTE_WORDS),
        )

    def to_params(self) -> dict[str, Any]:
        """``{"level", "min_quote_words"}``, the form stored in the run's spec."""
        return {"level": self.level, "min_quote_words": self.min_quote_words}

    def quote_problem(self, text: str) -> str | None:
        """Why a located quote is too short to validate on its own at this level, or ``None``."""
        words = len(_WORD.findall(text))
        if self.level != "details" or words >= self.min_quote_words:
            return None
        noun = "word" if words == 1 else "words"
        return f"it is {words} {noun} (rule: {words_rule(self.min_quote_words)})"


def sentence_spans(text: str, protected: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """The sentences of ``text`` as ``[start, end)`` character spans, in order.

    Args:
        text: the answer.
        protected: spans no boundary may fall inside (inline citations).

    Returns:
        Spans covering ``text`` without gaps; see the module docstring for the rule.

    """
    spans: list[tuple[int, int]] = []
    start = 0
    for found in _BOUNDARY.finditer(text):
        if any(a <= found.start() < b for a, b in protected):
            continue
        if found.group("stop") is not None and found.group("stop") == ".":
            word = regex.search(r"[\p{L}.]*$", text[: found.start()])
            before = word.group() if word is not None else ""
            if before.lower() in _ABBREVIATIONS or regex.fullmatch(r"\p{L}", before):
                continue
        spans.append((start, found.end()))
        start = found.end()
    if start < len(text) or not spans:
        spans.append((start, len(text)))
    return spans


@dataclass(frozen=True)
class Cited:
    """One citation of an answer, as the detail check sees it.

    Attributes:
        label: how the answer names what it cites (``call_2``, ``read_1``).
        at: where the citation stands in the answer (a character offset), or ``None``
            for an explicit citation (every sentence carries it).
        evidence: the ``(evidence id, bytes)`` the citation points at, in order; empty
            when the cited call returned no result.

    """

    label: str
    at: int | None
    evidence: tuple[tuple[str, bytes], ...] = field(default=())


@dataclass(frozen=True)
class DetailCheck:
    """One detail of a cited sentence and where it was found.

    Attributes:
        detail: the detail as the answer states it (offsets in the answer).
        sentence: the sentence, whitespace trimmed.
        labels: the citations the sentence carries, in order, without repeats.
        label: the citation whose result holds the detail, or ``None``.
        evidence: the evidence id holding it, or ``None``.
        found: the supporting detail in that evidence (byte offsets), or ``None``.

    """

    detail: Detail
    sentence: str
    labels: tuple[str, ...]
    label: str | None = None
    evidence: str | None = None
    found: Detail | None = None

    @property
    def problem(self) -> str | None:
        """The failure reason when the detail was not found, else ``None``."""
        if self.found is not None:
            return None
        where = " or ".join(self.labels)
        return (
            f"detail {self.detail.text!r} ({self.detail.normal}) of the sentence "
            f"{self.sentence!r} is not in the result of {where} (rule: {DETAIL_RULE})"
        )


def _masked(text: str, protected: Sequence[tuple[int, int]]) -> str:
    """``text`` with each inline citation and citation marker blanked (same length)."""
    chars = list(_MARKER.sub(lambda found: " " * len(found.group()), text))
    for start, end in protected:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _claims_of(masked: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` with each sentence that is only citations joined to the one before it.

    ``Oslo became the capital in 1299. "Oslo has been the capital" [call_1].``: the
    citation stands alone, and cites the sentence before it.
    """
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and not _WORDY.search(masked, start, end):
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def check_details(
    text: str,
    cited: Sequence[Cited],
    protected: Sequence[tuple[int, int]] = (),
    read: Callable[[bytes], list[Detail]] = details_in_bytes,
) -> list[DetailCheck]:
    """Check every detail of every cited sentence of ``text`` (see the module docstring).

    Args:
        text: the answer.
        cited: its citations, each with the evidence it points at.
        protected: the spans of inline citations: never split, and their quoted words
            are not details (the quote itself must occur in the result).
        read: the extractor applied to evidence bytes (the default; a test may count).

    Returns:
        One :class:`DetailCheck` per detail of each sentence that carries a citation,
        in the text's order; a detail is looked for in the sentence's citations in
        order, each one's evidence in order, and the first supporting detail wins.

    """
    masked = _masked(text, protected)
    cache: dict[str, list[Detail]] = {}
    out: list[DetailCheck] = []
    for start, end in _claims_of(masked, sentence_spans(text, protected)):
        carried = [c for c in cited if c.at is None or start <= c.at < end]
        if not carried:
            continue
        labels = tuple(dict.fromkeys(c.label for c in carried))
        sentence = text[start:end].strip()
        for detail in extract_details(masked, start, end):
            check = DetailCheck(detail, sentence, labels)
            for citation in carried:
                for evidence, data in citation.evidence:
                    found = cache.get(evidence)
                    if found is None:
                        found = cache[evidence] = read(data)
                    there = next((d for d in found if supported_by(detail, d)), None)
                    if there is not None:
                        label = citation.label
                        check = DetailCheck(detail, sentence, labels, label, evidence, there)
                        break
                if check.found is not None:
                    break
            out.append(check)
    return out
