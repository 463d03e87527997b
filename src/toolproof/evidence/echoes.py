"""What a quote may not rest on: a result's echo of its own call's arguments, or a few characters.

Two rules, applied wherever a quote someone wrote (an agent's answer, a model's
reply) is located in a tool result (:mod:`toolproof.evidence.answer`,
:mod:`toolproof.evidence.llm_reasoner`):

* **Echoes support nothing.** The bytes of a result that merely repeat the call's own
  arguments are what the caller wrote, not what the tool found: a model that puts an
  invented sentence into a tool's arguments and has the tool echo it must not be able
  to quote it back as evidence. A located quote is an *echo* when its span's text (the
  original bytes of the result, :func:`~toolproof.evidence.quotes.locate_quote`) also
  occurs in the call's arguments: inside any string of them (a value or an object
  key, at any depth; byte-exact or with only whitespace runs differing), or verbatim
  in their canonical JSON (RFC 8785; a number, a fragment of JSON). An echo does not
  validate, whichever way it was cited (inline or as an explicit citation).
* **Short quotes never validate on their own.** A located span shorter than
  :data:`MIN_QUOTE_CHARS` characters (after trimming whitespace) matches by chance
  in almost any result; it may stand beside a full quote but is not one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolproof.errors import CanonicalizationError
from toolproof.evidence.quotes import locate_quote
from toolproof.identity import canonical_json

__all__ = ["ECHO_RULE", "MIN_QUOTE_CHARS", "SHORT_RULE", "echo_of", "is_short", "quote_problem"]

MIN_QUOTE_CHARS = 4
"""The fewest characters (Unicode code points, whitespace trimmed) a quote that validates has."""

ECHO_RULE = "a result's echo of its call's own arguments supports nothing"
"""The echo rule, as a failure reason names it."""

SHORT_RULE = f"a quote shorter than {MIN_QUOTE_CHARS} characters never validates on its own"
"""The short-quote rule, as a failure reason names it."""


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value: string values and object keys, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def echo_of(text: str, arguments: Mapping[str, Any] | None) -> str | None:
    """Where ``text`` (a located quote's original text) occurs in ``arguments``, or ``None``.

    Args:
        text: the span's text, as the result's bytes spell it.
        arguments: the call's arguments (a JSON object), or ``None`` when the evidence
            is not a call's result (a retrieved chunk): then nothing is an echo.

    Returns:
        ``"an argument string"`` or ``"the arguments' canonical JSON"`` when ``text``
        is found there (see the module docstring), else ``None``.

    """
    if arguments is None or not text.strip():
        return None
    for value in _strings(arguments):
        if text in value or locate_quote(value.encode("utf-8", "surrogatepass"), text):
            return "an argument string"
    try:
        encoded = canonical_json(dict(arguments))
    except CanonicalizationError:  # no canonical form: only the strings can be compared
        return None
    if text.encode("utf-8", "surrogatepass") in encoded:
        return "the arguments' canonical JSON"
    return None


def is_short(text: str) -> bool:
    """Whether ``text`` has fewer than :data:`MIN_QUOTE_CHARS` characters, whitespace trimmed."""
    return len(text.strip()) < MIN_QUOTE_CHARS


def quote_problem(text: str, arguments: Mapping[str, Any] | None) -> str | None:
    """Why the located quote ``text`` does not validate, or ``None`` when it may.

    Args:
        text: the span's original text in the result.
        arguments: the arguments of the call whose result holds it (``None``: not a
            call's result).

    Returns:
        A reason naming the rule, or ``None``: :data:`SHORT_RULE` for a short quote
        (whether or not it is an echo: it may stand beside a full quote, never alone),
        else :data:`ECHO_RULE` for an echo.

    """
    if is_short(text):
        return f"it is {len(text.strip())} characters (rule: {SHORT_RULE})"
    where = echo_of(text, arguments)
    if where is not None:
        return f"it repeats {where} of that call (rule: {ECHO_RULE})"
    return None
