"""RFC 8785 canonical JSON, digests and content ids (toolproof.identity)."""

from __future__ import annotations

import decimal
import enum
import hashlib
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolproof import CanonicalizationError, canonical_json, content_id, digest
from toolproof.identity import (
    MAX_DEPTH,
    digest_json,
    is_digest,
    parse_digest,
)

ENCODERS: list[Callable[[Any], bytes]] = [canonical_json]

# Characters whose UTF-16 order differs from their code point order, and the RFC's own.
SPECIAL_CHARS = [
    "\u20ac",
    "\r",
    "\ufb33",
    "1",
    "\U0001f600",
    "\u0080",
    "\u00f6",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0010ffff",
    '"',
    "\\",
    "\x00",
    "\x1f",
    "\x7f",
    "\u2028",
]
chars = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(SPECIAL_CHARS))
texts = st.text(chars, max_size=12)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70).map(float),  # integral doubles beyond 2**53
    st.builds(lambda m, e: m * 10.0**e, st.integers(-999, 999), st.integers(-30, 30)),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53 - 1), 2**53 - 1),
    floats,
    texts,
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(texts, children, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_agrees_with_rfc8785_package(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_double_agrees_with_rfc8785(value: float) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


# RFC 8785 Appendix B: IEEE 754 bit pattern -> ECMAScript serialization.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize("encode", ENCODERS)
@pytest.mark.parametrize(("bits", "text"), RFC_NUMBERS)
def test_rfc8785_number_table(encode: Callable[[Any], bytes], bits: str, text: str) -> None:
    assert encode(_double(bits)) == text.encode()


@pytest.mark.parametrize("encode", ENCODERS)
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (-0.0, "0"),
        (333333333.33333329, "333333333.3333333"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (1e20, "100000000000000000000"),
        (2.0**60, "1152921504606847000"),
        (0.1, "0.1"),
        (1.5, "1.5"),
        (100.0, "100"),
        (-1e-6, "-0.000001"),
        (1.5e-7, "1.5e-7"),
        (2**53 - 1, "9007199254740991"),
        (-(2**53 - 1), "-9007199254740991"),
    ],
)
def test_numbers(encode: Callable[[Any], bytes], value: float, text: str) -> None:
    assert encode(value) == text.encode()


@pytest.mark.parametrize("encode", ENCODERS)
def test_rfc8785_sorting_example(encode: Callable[[Any], bytes]) -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    ).encode()
    assert encode(value) == expected


@pytest.mark.parametrize("encode", ENCODERS)
def test_rfc8785_section_3_2_2_example(encode: Callable[[Any], bytes]) -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert encode(json.loads(source)) == expected


@pytest.mark.parametrize("encode", ENCODERS)
def test_string_escapes_follow_json_stringify(encode: Callable[[Any], bytes]) -> None:
    value = '\b\t\n\f\r\x00\x01\x1f\x7f\u2028"\\/\U0001f600'
    assert (
        encode(value)
        == b'"\\b\\t\\n\\f\\r\\u0000\\u0001\\u001f\x7f\xe2\x80\xa8\\"\\\\/\xf0\x9f\x98\x80"'
    )


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


NAN = float("nan")
INF = float("inf")

REJECTIONS: list[tuple[Any, str, str]] = [
    (NAN, "$", "nan is not a JSON number (NaN and Infinity are refused)"),
    ({"a": [1, NAN]}, "$.a[1]", "nan is not a JSON number (NaN and Infinity are refused)"),
    ({"x": {"y": INF}}, "$.x.y", "inf is not a JSON number (NaN and Infinity are refused)"),
    ([-INF], "$[0]", "-inf is not a JSON number (NaN and Infinity are refused)"),
    ({"a": {1: "x"}}, "$.a", "object key 1 is int, not str"),
    ({None: 1}, "$", "object key None is NoneType, not str"),
    ({"a": [b"raw"]}, "$.a[0]", "bytes is not a JSON value"),
    ({"tags": {"a", "b"}}, "$.tags", "set is not a JSON value"),
    ({"p": (1, 2)}, "$.p", "tuple is not a JSON value (use a list)"),
    ([None, object()], "$[1]", "object is not a JSON value"),
    ({"c": Color.RED}, "$.c", "Color is not a JSON value"),
    ({"l": Level.LOW}, "$.l", "Level is not a JSON value"),
    ({"n": 10**4300}, "$.n", "integer of more than 4300 digits"),
    ([-(10**5000)], "$[0]", "integer of more than 4300 digits"),
    (
        {"k": ["ok", "a\ud800"]},
        "$.k[1]",
        "string holds a lone surrogate at offset 1 (not valid Unicode)",
    ),
    (
        {"z": 1, "a\udc00": 1},
        "$",
        "object key 'a\\udc00' holds a lone surrogate at offset 1 (not valid Unicode)",
    ),
    (
        {"a b": [1, [NAN]]},
        '$["a b"][1][0]',
        "nan is not a JSON number (NaN and Infinity are refused)",
    ),
    # several refusals: the first in the canonical order of the output is named
    ({"b": NAN, "a": [1, (2,)]}, "$.a[1]", "tuple is not a JSON value (use a list)"),
    (
        {"\ufb33": NAN, "\U0001f600": [INF]},
        '$["\U0001f600"][0]',
        "inf is not a JSON number (NaN and Infinity are refused)",
    ),
    ({"b": {2: 1}, "a": {"x": [set()]}}, "$.a.x[0]", "set is not a JSON value"),
    # keys that sort (or join) like str keys, or whose comparison itself raises
    ({"a": 1, Color.RED: 2}, "$", "object key <Color.RED: 'red'> is Color, not str"),
    ({1: "x", 2: "y"}, "$", "object key 1 is int, not str"),
    ({"a": 1, 2: "y"}, "$", "object key 2 is int, not str"),
    (
        {decimal.Decimal("NaN"): 1, decimal.Decimal(1): 2},
        "$",
        "object key Decimal('NaN') is Decimal, not str",
    ),
]


@pytest.mark.parametrize("encode", ENCODERS)
@pytest.mark.parametrize(("value", "path", "rule"), REJECTIONS)
def test_rejections_name_the_path(
    encode: Callable[[Any], bytes], value: Any, path: str, rule: str
) -> None:
    with pytest.raises(CanonicalizationError) as caught:
        encode(value)
    assert (caught.value.path, caught.value.rule) == (path, rule)
    assert str(caught.value) == f"cannot canonicalize value at {path}: {rule}"


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("encode", ENCODERS)
def test_nesting_limit(encode: Callable[[Any], bytes]) -> None:
    assert MAX_DEPTH == 256
    assert encode(_nested(256)) == b"[" * 256 + b"1" + b"]" * 256
    with pytest.raises(CanonicalizationError) as caught:
        encode({"a": _nested(256)})
    assert caught.value.path == "$.a" + "[0]" * 255
    assert caught.value.rule == "nested deeper than 256 levels"


def test_digest_and_content_id() -> None:
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert digest(b"") == f"sha256:{empty}"
    expected_hex = hashlib.sha256(b'{"a":1,"b":[true,null]}').hexdigest()
    assert digest_json({"b": [True, None], "a": 1}) == f"sha256:{expected_hex}"
    assert content_id("call", {"b": [True, None], "a": 1}) == f"call_{expected_hex}"
    assert is_digest(f"sha256:{empty}")
    assert not is_digest(f"sha256:{empty.upper()}")
    assert not is_digest(f"sha512:{empty}")
    assert not is_digest(123)
    assert parse_digest(f"sha256:{empty}") == empty
    with pytest.raises(ValueError, match=r"^not a sha256 digest: 'md5:00'"):
        parse_digest("md5:00")


def test_content_id_refuses_non_json() -> None:
    with pytest.raises(CanonicalizationError, match=r"at \$\.x: tuple is not a JSON value"):
        content_id("call", {"x": ()})


@pytest.mark.parametrize("encode", [canonical_json])
def test_integers_beyond_the_double_range_are_written_exactly_and_distinctly(
    encode: Callable[[Any], bytes],
) -> None:
    # issue 12 item 15: an int64 bound must not round to 2**63 (RFC 8785 would)
    assert encode({"maximum": 2**63 - 1}) == b'{"maximum":9223372036854775807}'
    assert encode({"maximum": 2**63}) == b'{"maximum":9223372036854775808}'
    assert encode([-(2**64), 2**53]) == b"[-18446744073709551616,9007199254740992]"
    assert encode(2.0**63) == b"9223372036854776000"  # a float keeps its ECMAScript form
    assert encode(10**4299) == b"1" + b"0" * 4299
    assert json.loads(encode({"n": 2**63 - 1}))["n"] == 2**63 - 1  # round-trips exactly


@given(st.integers(min_value=-(2**200), max_value=2**200))
def test_every_integer_round_trips_through_its_canonical_bytes(value: int) -> None:
    data = canonical_json({"v": value})
    assert data == b'{"v":' + str(value).encode() + b"}"
    assert json.loads(data)["v"] == value


def test_there_is_no_compiled_extension() -> None:
    src = Path(__file__).resolve().parents[1] / "src" / "toolproof"
    assert not [path.name for path in src.rglob("*") if path.suffix in (".c", ".h", ".pyi")]


def test_digests_are_formatted_by_identity_only() -> None:
    src = Path(__file__).resolve().parents[1] / "src" / "toolproof"
    by_hand = sorted(
        path.relative_to(src).as_posix()
        for path in src.rglob("*.py")
        if '"sha256:" + hashlib' in path.read_text(encoding="utf-8")
        or '"sha256:" + sha.' in path.read_text(encoding="utf-8")
    )
    assert by_hand == ["identity.py"]
    from toolproof.identity import digest, hash_digest

    assert hash_digest(hashlib.sha256(b"ab")) == digest(b"ab")


def test_no_module_but_identity_prefixes_a_hex_with_sha256() -> None:
    src = Path(__file__).resolve().parents[1] / "src" / "toolproof"
    patterns = ('"sha256:" +', "'sha256:' +", 'f"sha256:{', "f'sha256:{")
    by_hand = sorted(
        path.relative_to(src).as_posix()
        for path in src.rglob("*.py")
        if any(pattern in path.read_text(encoding="utf-8") for pattern in patterns)
    )
    assert by_hand == ["identity.py"]
    from toolproof.identity import digest, digest_of_hex

    assert digest_of_hex(hashlib.sha256(b"ab").hexdigest()) == digest(b"ab")
