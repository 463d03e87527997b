"""The prompt contract of the ``llm`` reasoner: what a model is asked, and how its reply is read.

The model sees numbered evidence (``[E1]``, ``[E2]``, ...) and is asked for one JSON
object::

    {"answer": "<the answer, or null>", "quotes": [{"evidence": "E1", "text": "<exact words>"}]}

:func:`parse_answer` reads a reply tolerantly — a fenced code block, prose around the
object, ``quote``/``source`` as synonyms, ``"[E1]"``/``"e1"``/``"1"`` as labels — because
many endpoints cannot enforce the structured-output ``response_format``. What it never
does is trust a quote: the reasoner locates each one in the evidence bytes
(:mod:`toolproof.evidence.quotes`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ParsedAnswer",
    "ParsedQuote",
    "answer_schema",
    "evidence_label",
    "parse_answer",
    "user_prompt",
]

DEFAULT_SYSTEM_PROMPT = (
    "You answer questions only from the evidence you are given. You copy quotes exactly, "
    "character for character, from the evidence they name. You reply with one JSON object "
    "and nothing else."
)
"""The system message when the spec names no ``system_prompt_file``."""

_IDK = re.compile(
    r"^\s*(?:i\s+(?:do\s+not|don'?t|cannot|can'?t)\s+(?:know|tell|answer|say)\b.*"
    r"|(?:unknown|n/?a|none|no\s+answer|not\s+(?:stated|given|known|answered))\W*)$",
    re.IGNORECASE | re.DOTALL,
)
_LABEL = re.compile(r"^\[?\s*[Ee]?\s*(\d{1,4})\s*\]?$")


def evidence_label(index: int) -> str:
    """The label of the ``index``-th (0-based) piece of evidence shown: ``E1``, ``E2``, ..."""
    return f"E{index + 1}"


def answer_schema(max_quotes: int) -> dict[str, Any]:
    """The JSON Schema of a reply, for endpoints that enforce structured output.

    Args:
        max_quotes: the most quotes a reply may carry (``maxItems``).

    Returns:
        A draft 2020-12 schema object: ``answer`` (a string) and 1 to ``max_quotes``
        ``quotes``. A model held to it can still say it does not know (``"I don't
        know"``); one that is not held to it may also answer ``null``.

    """
    quote = {
        "type": "object",
        "properties": {"evidence": {"type": "string"}, "text": {"type": "string"}},
        "required": ["evidence", "text"],
    }
    return {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "quotes": {"type": "array", "items": quote, "minItems": 1, "maxItems": max_quotes},
        },
        "required": ["answer", "quotes"],
    }


def user_prompt(question: str, evidence: list[str], max_quotes: int) -> str:
    """The user message: the contract, the question, and the labelled evidence texts.

    Args:
        question: the question to answer.
        evidence: the evidence texts, shown as ``[E1]``, ``[E2]``, ... in this order.
        max_quotes: the most quotes asked for.

    Returns:
        The message text (deterministic for the same arguments).

    """
    shown = "\n\n".join(f"[{evidence_label(index)}]\n{text}" for index, text in enumerate(evidence))
    return (
        "Answer the question using only the evidence. Reply with one JSON object with "
        '"answer" (one or two sentences) and "quotes" (sentences copied exactly from the '
        f"evidence, each naming its evidence label; 1 to {max_quotes} quotes). If the "
        'evidence does not answer the question, reply {"answer": null, "quotes": []}.\n\n'
        f"{_EXAMPLE}\n\n"
        f"Now the real one.\nQuestion: {question}\nEvidence:\n{shown}\nReply:"
    )


_EXAMPLE = (
    "Example.\nQuestion: What colour is the sky?\nEvidence:\n[E1]\nClouds are white. "
    "The sky is blue on a clear day.\n"
    'Reply: {"answer": "The sky is blue on a clear day.", "quotes": [{"evidence": "E1", '
    '"text": "The sky is blue on a clear day."}]}'
)
"""The worked example in every user message (small models copy its shape, not a template)."""


@dataclass(frozen=True)
class ParsedQuote:
    """One quote of a reply.

    Attributes:
        label: the evidence label it names, normalised (``E2``), or what it said when
            that is no label (then it names no evidence shown).
        text: the quoted text, as the model wrote it.

    """

    label: str
    text: str


@dataclass(frozen=True)
class ParsedAnswer:
    """A reply read by :func:`parse_answer`.

    Attributes:
        answer: the answer text; ``None`` when the model said the evidence does not
            answer (``null``, empty, or an "I don't know" phrase).
        quotes: the quotes, in the reply's order.

    """

    answer: str | None
    quotes: tuple[ParsedQuote, ...]


def _objects(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start >= 0 and len(found) < 8:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        start = text.find("{", end)
    return found


def _label(raw: Any) -> str:
    text = str(raw).strip()
    matched = _LABEL.match(text)
    return f"E{int(matched.group(1))}" if matched else text


def _quotes(raw: Any) -> tuple[ParsedQuote, ...]:
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        text = item.get("text", item.get("quote"))
        label = item.get("evidence", item.get("source", item.get("id", "")))
        if isinstance(text, str) and text.strip():
            out.append(ParsedQuote(_label(label), text))
    return tuple(out)


def parse_answer(text: str) -> ParsedAnswer | None:
    """Read a model's reply; see the module docstring.

    Args:
        text: the message content the model returned.

    Returns:
        The first JSON object in ``text`` that has an ``answer`` or ``quotes`` key, read
        tolerantly; ``None`` when there is no such object (the reply is malformed).

    """
    for found in _objects(text):
        if "answer" not in found and "quotes" not in found:
            continue
        answer = found.get("answer")
        if not isinstance(answer, str) or not answer.strip() or _IDK.match(answer):
            answer = None
        return ParsedAnswer(answer, _quotes(found.get("quotes")))
    return None
