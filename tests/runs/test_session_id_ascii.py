"""A session id's letters and digits are ASCII only (issue 35 point 8, docs/durability.md)."""

from __future__ import annotations

import pytest

from toolproof.errors import InputError
from toolproof.runs.resume import check_session_id


@pytest.mark.parametrize("name", ["café", "٣x", "\uff4eightly"])
def test_a_session_id_with_a_non_ascii_letter_or_digit_is_refused(name: str) -> None:
    with pytest.raises(InputError) as refused:
        check_session_id(name)
    assert refused.value.message == (
        f"session_id {name!r}: not a session name (rule: a letter or digit, then up to 99 "
        "letters, digits, '_' or '-')"
    )


def test_an_ascii_session_id_is_a_name() -> None:
    assert check_session_id("Nightly_42-b") == "Nightly_42-b"
