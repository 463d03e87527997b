"""The content words of a question: what retrieval queries and the extractive reasoner match."""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "query_terms"]

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not of off on once only or other our out over own same she should so
    some such than that the their them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your
    explain describe tell mean means happen happens""".split()  # noqa: SIM905
)
"""English function words and question words left out of queries."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(text: str) -> list[str]:
    """The distinct lowercase content words of ``text``, in order (stopwords dropped)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS and word not in seen:
            seen[word] = None
    return list(seen)
