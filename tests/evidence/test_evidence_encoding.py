from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolproof.errors import InputError
from toolproof.evidence.encoding import encode_value, locate, parse_ref
from toolproof.identity import canonical_json

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, str(index)))
    return out


@given(json_values)
def test_locate_finds_every_part_in_the_canonical_bytes(value: Any) -> None:
    data, _media_type = encode_value(value)
    for path in _paths(value):
        start, end, part = locate(value, list(path))
        piece = data[start:end]
        if isinstance(value, str):
            assert piece == value.encode()
        elif isinstance(part, str) and part and canonical_json(part)[1:-1] == part.encode():
            assert data[start - 1 : end + 1] == canonical_json(part)
        else:
            assert piece == canonical_json(part)


def test_string_values_are_raw_utf8_and_others_canonical_json() -> None:
    assert encode_value("héllo") == ("héllo".encode(), "text/plain; charset=utf-8")
    assert encode_value({"b": 1, "a": [1.0]}) == (b'{"a":[1],"b":1}', "application/json")


def test_locate_names_the_missing_step() -> None:
    with pytest.raises(KeyError, match="key 'x' not found"):
        locate({"a": 1}, ["x"])
    with pytest.raises(KeyError, match="index '3' is not in a list of 1 items"):
        locate([1], ["3"])


def test_parse_ref() -> None:
    assert parse_ref("steps.a.value.b.0") == ("a", ["b", "0"])
    with pytest.raises(InputError, match="is not of the form"):
        parse_ref("steps.a.result")
