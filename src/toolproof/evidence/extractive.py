"""Extractive answering: pick the sentences of the evidence that answer a question.

Nothing is generated: a claim's statement is the text of a sentence found in the
evidence (whitespace folded), and every support is the exact byte span of a
sentence inside an evidence file, so each citation can be checked byte for byte.

Scoring, deterministic and explainable:

1. The question's content words (:func:`toolproof.evidence.terms.query_terms`)
   are matched against each sentence's words by a light stem (plural and verb
   endings folded).
2. Unless at least ``min_term_share`` of the question's content words occur in the
   evidence, the question is not answered. Each occurring term weighs
   ``ln(1 + N / df)`` over the N candidate sentences; a sentence's *coverage* is the
   weight of the terms it contains over the weight of all occurring terms.
3. A sentence qualifies when its coverage is at least ``min_coverage`` and it
   contains the question's rarest term; qualifying sentences are ranked by coverage,
   then by the retrieval rank of their evidence, then by position.
4. The best qualifying sentence is the answer; the best ``min_supports`` qualifying
   sentences are its supports, distinct sentences first (the same sentence found in
   another document fills in only when there are not enough distinct ones). With
   fewer qualifying sentences than ``min_supports`` the answer is *insufficient
   evidence*: no claim is made.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from toolproof.evidence.terms import query_terms

__all__ = ["Answer", "EvidenceText", "Sentence", "answer_question", "split_sentences"]

_BOUNDARY = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"')\]\u2019\u201d]))\s+(?=[\"'(*\[A-Z0-9\u2018\u201c])|\n\s*\n"
)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_HEADING = re.compile(r"^[^\n]*\n[ \t]*[=*\-~^#+`]{3,}[ \t]*$", re.MULTILINE)
_END = re.compile(r"[.!?:][\"')\]\u2019\u201d*]*$")


@dataclass(frozen=True)
class EvidenceText:
    """Evidence bytes offered to the reasoner.

    Attributes:
        evidence_id: the evidence's id in the run.
        data: the exact evidence bytes (UTF-8 text).
        rank: retrieval rank (1 is best); ties between sentences go to the better rank.
    """

    evidence_id: str
    data: bytes
    rank: int = 1


@dataclass(frozen=True)
class Sentence:
    """A sentence of an evidence file.

    Attributes:
        evidence_id: the evidence it sits in.
        start: first byte offset within the evidence bytes.
        end: one past the last byte offset.
        text: the sentence text with whitespace folded to single spaces.
        rank: the evidence's retrieval rank.
        coverage: share of the question's term weight it contains (0..1).
    """

    evidence_id: str
    start: int
    end: int
    text: str
    rank: int
    coverage: float = 0.0


@dataclass(frozen=True)
class Answer:
    """An extractive answer: a statement and its supporting sentences.

    Attributes:
        statement: the answer sentence, whitespace folded.
        supports: the supporting sentences, best first (the answer sentence first).
        confidence: the mean coverage of the supports, rounded to 4 decimals (0..1).
    """

    statement: str
    supports: tuple[Sentence, ...]
    confidence: float


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _is_prose(text: str) -> bool:
    if ">>>" in text or "::=" in text or text.startswith("..."):
        return False
    if _END.search(text) is None or len(text.split()) < 4:
        return False
    letters = sum(ch.isalpha() for ch in text)
    return letters >= 0.6 * len(text)


def split_sentences(evidence: EvidenceText) -> list[Sentence]:
    """Split evidence bytes into prose sentences with exact byte offsets.

    Headings (a line underlined with ``===``/``***``...), grammar productions
    (``::=``), interactive-session lines (``>>>``), fragments without closing
    punctuation or under four words, and fragments mostly not letters are left out.
    """
    text = evidence.data.decode("utf-8")
    cleaned = _HEADING.sub(lambda m: "\n" * len(m.group(0)), text)
    sentences: list[Sentence] = []
    position = 0
    byte_offset = 0
    pieces = [*list(_BOUNDARY.finditer(cleaned)), None]
    for boundary in pieces:
        end = boundary.start() if boundary is not None else len(cleaned)
        chunk = cleaned[position:end]
        stripped_left = len(chunk) - len(chunk.lstrip())
        body = chunk.strip()
        if body:
            start_char = position + stripped_left
            start_byte = byte_offset + len(text[position:start_char].encode("utf-8"))
            end_byte = start_byte + len(body.encode("utf-8"))
            folded = " ".join(body.split())
            if _is_prose(folded):
                sentences.append(
                    Sentence(evidence.evidence_id, start_byte, end_byte, folded, evidence.rank)
                )
        if boundary is None:
            break
        byte_offset += len(text[position : boundary.end()].encode("utf-8"))
        position = boundary.end()
    return sentences


def answer_question(
    question: str,
    evidence: Sequence[EvidenceText],
    *,
    min_supports: int = 1,
    min_coverage: float = 0.5,
    min_term_share: float = 0.5,
) -> Answer | None:
    """Answer ``question`` from ``evidence`` by extraction, or return ``None``.

    Args:
        question: the question, in natural language.
        evidence: the evidence texts (retrieved chunks or tool results).
        min_supports: how many qualifying sentences an answer needs (>= 1).
        min_coverage: the least share of the question's term weight a sentence must hold.
        min_term_share: the least share of the question's content words that must occur
            somewhere in the evidence; below it the question is not answered.

    Returns:
        The :class:`Answer`, or ``None`` for insufficient evidence.

    Raises:
        ValueError: ``min_supports`` < 1 or ``min_coverage`` outside (0, 1].
    """
    if min_supports < 1:
        raise ValueError(f"min_supports must be >= 1, got {min_supports}")
    if not 0 < min_coverage <= 1:
        raise ValueError(f"min_coverage must be in (0, 1], got {min_coverage}")
    asked = list(dict.fromkeys(_stem(term) for term in query_terms(question)))
    candidates = [s for item in evidence for s in split_sentences(item)]
    if not asked or not candidates:
        return None
    words = [{_stem(w) for w in _WORD.findall(s.text.lower())} for s in candidates]
    terms = [term for term in asked if any(term in ws for ws in words)]
    if len(terms) < min_term_share * len(asked):
        return None
    count = len(candidates)
    weights = {
        term: math.log(1 + count / max(1, sum(term in ws for ws in words))) for term in terms
    }
    total = sum(weights.values())
    rarest = min(terms, key=lambda term: (sum(term in ws for ws in words) or count + 1, term))
    qualified: list[Sentence] = []
    for sentence, ws in zip(candidates, words, strict=True):
        if rarest not in ws:
            continue
        coverage = round(sum(weights[t] for t in terms if t in ws) / total, 6)
        if coverage >= min_coverage:
            qualified.append(
                Sentence(
                    sentence.evidence_id,
                    sentence.start,
                    sentence.end,
                    sentence.text,
                    sentence.rank,
                    coverage,
                )
            )
    qualified.sort(key=lambda s: (-s.coverage, s.rank, s.evidence_id, s.start))
    if len(qualified) < min_supports:
        return None
    # Prefer supports that say different things; the same sentence found in a second
    # document counts only when there are not enough distinct ones.
    distinct: dict[str, Sentence] = {}
    for sentence in qualified:
        distinct.setdefault(sentence.text, sentence)
    chosen = list(distinct.values())[:min_supports]
    chosen += [s for s in qualified if s not in chosen][: min_supports - len(chosen)]
    supports = tuple(chosen)
    confidence = round(sum(s.coverage for s in supports) / len(supports), 4)
    return Answer(supports[0].text, supports, confidence)
