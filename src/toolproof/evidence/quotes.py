"""Locate a quoted passage inside evidence bytes: exact first, whitespace-insensitive second.

A quote is text somebody (a model, an agent's answer) says occurs in a piece of
evidence. It is never trusted: :func:`locate_quote` finds it in the stored bytes and
returns the byte span ``[start, end)`` of the **original** bytes, so a
:class:`~toolproof.contract.evidence.SupportRef` built from it cites what the file
holds, never the quote's own spelling.

* ``exact``: the quote's UTF-8 bytes occur as they are (the first occurrence wins).
* ``whitespace``: the quote's words (maximal runs of non-whitespace) occur in order,
  separated in the evidence by any non-empty run of ASCII or Unicode whitespace
  (line breaks included). The span runs from the first byte of the first word to
  the last byte of the last word, so it starts and ends on evidence bytes that the
  quote itself contains.

Nothing else is forgiven: no case folding, no punctuation or quote-mark
normalisation, no partial match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import regex

__all__ = ["MAX_QUOTE_BYTES", "QuoteMatch", "locate_quote"]

MAX_QUOTE_BYTES = 4096
"""The longest quote searched for, in UTF-8 bytes; a longer one is not located."""

_WORD = regex.compile(r"\S+")
_SPACE = (
    rb"(?:\s|\xc2\x85|\xc2\xa0|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
    rb"|\xe2\x81\x9f|\xe3\x80\x80)+"
)
"""One or more whitespace characters as UTF-8 bytes: ASCII whitespace plus the Unicode
``White_Space`` characters outside ASCII (NEL, NBSP, Ogham space, U+2000..U+200A, LS,
PS, NNBSP, MMSP, ideographic space)."""


@dataclass(frozen=True)
class QuoteMatch:
    """Where a quote sits in the evidence bytes.

    Attributes:
        start: first byte of the match (inclusive).
        end: end of the match (exclusive); ``end > start``.
        mode: ``exact`` (the quote's bytes as they are) or ``whitespace`` (its words,
            whitespace runs between them differing).

    """

    start: int
    end: int
    mode: Literal["exact", "whitespace"]


def locate_quote(data: bytes, quote: str) -> QuoteMatch | None:
    """Find ``quote`` in ``data``; see the module docstring for what matches.

    Args:
        data: the evidence bytes (UTF-8 text, or anything: binary never matches a
            non-empty quote by accident more than its bytes allow).
        quote: the quoted text.

    Returns:
        The :class:`QuoteMatch` of the first occurrence, or ``None`` when the quote is
        empty or only whitespace, longer than :data:`MAX_QUOTE_BYTES`, or not there.

    """
    needle = quote.encode("utf-8")
    if not needle.strip() or len(needle) > MAX_QUOTE_BYTES:
        return None
    at = data.find(needle)
    if at >= 0:
        return QuoteMatch(at, at + len(needle), "exact")
    words = [word.encode("utf-8") for word in _WORD.findall(quote)]
    if not words:
        return None
    pattern = _SPACE.join(regex.escape(word) for word in words)
    found = regex.search(pattern, data)
    if found is None:
        return None
    return QuoteMatch(found.start(), found.end(), "whitespace")
