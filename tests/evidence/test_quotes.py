"""Locating quotes in evidence bytes: exact, whitespace-insensitive, never anything looser."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolproof.evidence.quotes import MAX_QUOTE_BYTES, QuoteMatch, locate_quote

DATA = b"The nonlocal statement causes the listed identifiers\nto refer to  bound variables."


def test_an_exact_quote_is_its_own_bytes() -> None:
    match = locate_quote(DATA, "causes the listed identifiers")
    assert match == QuoteMatch(23, 52, "exact")
    assert DATA[23:52] == b"causes the listed identifiers"


def test_a_quote_spaced_differently_points_at_the_original_bytes() -> None:
    match = locate_quote(DATA, "listed identifiers to refer to bound")
    assert match is not None and match.mode == "whitespace"
    assert DATA[match.start : match.end] == b"listed identifiers\nto refer to  bound"


def test_unicode_whitespace_in_the_evidence_separates_words() -> None:
    data = "a\u00a0b\u2003c\u3000d".encode()
    match = locate_quote(data, "a b c d")
    assert match == QuoteMatch(0, len(data), "whitespace")


def test_nothing_looser_than_whitespace_is_forgiven() -> None:
    assert locate_quote(DATA, "The Nonlocal statement") is None  # case
    assert locate_quote(DATA, "bound variables") is not None
    assert locate_quote(DATA, "bound variables!") is None  # punctuation
    assert locate_quote(DATA, "identifiersto refer") is None  # a join is not a space
    assert locate_quote(DATA, "“nonlocal”") is None  # quote marks


def test_empty_blank_and_oversized_quotes_locate_nothing() -> None:
    assert locate_quote(DATA, "") is None
    assert locate_quote(DATA, " \n\t ") is None
    assert locate_quote(b"x" * (MAX_QUOTE_BYTES + 1), "x" * (MAX_QUOTE_BYTES + 1)) is None
    assert locate_quote(b"x" * MAX_QUOTE_BYTES, "x" * MAX_QUOTE_BYTES) == QuoteMatch(
        0, MAX_QUOTE_BYTES, "exact"
    )


def test_regex_metacharacters_are_literal() -> None:
    data = b"a (b|c)* [d] e.f"
    assert locate_quote(data, "(b|c)*  [d]") == QuoteMatch(2, 12, "whitespace")
    assert locate_quote(data, "e.f") == QuoteMatch(13, 16, "exact")
    assert locate_quote(b"eXf", "e.f") is None


words = st.lists(
    st.text(alphabet="abcdefghij.,;'\"()", min_size=1, max_size=6), min_size=1, max_size=12
)
gaps = st.lists(st.sampled_from([" ", "  ", "\n", "\t", " \n "]), min_size=12, max_size=12)


@given(words, gaps, st.integers(0, 11), st.integers(1, 12))
def test_any_run_of_words_is_found_on_original_bytes(
    text_words: list[str], spacing: list[str], first: int, count: int
) -> None:
    data = "".join(w + spacing[i] for i, w in enumerate(text_words)).encode()
    first %= len(text_words)
    chosen = text_words[first : first + count]
    quote = " ".join(chosen)
    match = locate_quote(data, quote)
    assert match is not None
    found = data[match.start : match.end]
    assert found.split() == quote.encode().split()  # the same words, original spacing
    assert not found[:1].isspace() and not found[-1:].isspace()
