"""The detail extractor and normalizer: numbers, units, percentages, money, dates, versions."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolproof.evidence.details import (
    Detail,
    details_in_bytes,
    extract_details,
    normal_number,
    supported_by,
)

_MONTHS = [datetime.date(2024, month, 1).strftime("%B") for month in range(1, 13)]


def _normals(text: str) -> list[tuple[str, str]]:
    return [(detail.kind, detail.normal) for detail in extract_details(text)]


def _one(text: str) -> Detail:
    found = extract_details(text)
    assert len(found) == 1, found
    return found[0]


def _grouped(number: int) -> str:
    return f"{number:,}"


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_thousands_separators_do_not_change_the_normal_form(number: int) -> None:
    assert normal_number(_grouped(number)) == normal_number(str(number)) == str(number)
    assert _one(f"about {_grouped(number)} rows").value == str(number)


@given(
    st.decimals(min_value=-(10**9), max_value=10**9, places=4, allow_nan=False),
    st.integers(min_value=0, max_value=3),
)
def test_trailing_zeros_do_not_change_the_normal_form(number: Decimal, zeros: int) -> None:
    written = f"{number:f}" + ("0" * zeros if "." in f"{number:f}" else "")
    assert Decimal(normal_number(written)) == number
    assert normal_number(written) == normal_number(f"{number:f}")


@given(st.dates(min_value=datetime.date(1000, 1, 1), max_value=datetime.date(2999, 12, 31)))
def test_every_written_form_of_a_date_has_the_iso_normal_form(day: datetime.date) -> None:
    month = _MONTHS[day.month - 1]
    forms = [
        day.isoformat(),
        f"{day.day} {month} {day.year}",
        f"{month} {day.day}, {day.year}",
        f"{month} {day.day} {day.year}",
        f"{day.day}th of {month} {day.year}",
        f"{month[:3]}. {day.day}, {day.year}",
    ]
    for form in forms:
        assert _normals(f"Released on {form}.") == [("date", day.isoformat())], form


_PERCENT = st.sampled_from(["%", " %", " percent", " per cent"])


@given(st.integers(min_value=0, max_value=10**9), _PERCENT)
def test_every_written_percent_has_one_normal_form(number: int, sign: str) -> None:
    assert _normals(f"grew {_grouped(number)}{sign} last year") == [("percent", f"{number} %")]


@given(
    st.integers(min_value=0, max_value=10**9),
    st.sampled_from(["${n}", "USD {n}", "US${n}", "{n} dollars", "{n} USD", "{n} Dollars"]),
)
def test_every_written_dollar_amount_has_one_normal_form(number: int, form: str) -> None:
    written = form.format(n=_grouped(number))
    assert _normals(f"it cost {written} in total") == [("money", f"{number} USD")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,000 and 1000 and 1000.0", [("number", "1000")] * 3),
        ("1.2 million and 1,200,000", [("number", "1200000")] * 2),
        ("-5 and \u22125 and +5", [("number", "-5"), ("number", "-5"), ("number", "5")]),
        ("0.50 and 00.5", [("number", "0.5"), ("number", "0.5")]),
        ("pages 10-20", [("number", "10"), ("number", "20")]),
        ("in 1,5 ways", [("number", "1"), ("number", "5")]),
    ],
)
def test_numbers(text: str, expected: list[tuple[str, str]]) -> None:
    assert _normals(text) == expected


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("5 km", "5 km"),
        ("5km", "5 km"),
        ("5 kilometres", "5 km"),
        ("5 Kilometers", "5 km"),
        ("5 miles", "5 mi"),
        ("5 mi", "5 mi"),
        ("5 meters", "5 m"),
        ("30 min", "30 min"),
        ("30 minutes", "30 min"),
        ("250 ms", "250 ms"),
        ("2 hours", "2 h"),
        ("3 days", "3 d"),
        ("12 MB", "12 MB"),
        ("1.5 GiB", "1.5 GiB"),
        ("-5 °C", "-5 °C"),
        ("80 km/h", "80 km/h"),
        ("3 inches", "3 in"),
    ],
)
def test_units(text: str, normal: str) -> None:
    assert _normals(f"it is {text} here") == [("number", normal)]


def test_in_alone_is_no_unit() -> None:
    assert _normals("5 in 10 people") == [("number", "5"), ("number", "10")]


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("$1,200", "1200 USD"),
        ("USD 1200", "1200 USD"),
        ("1,200 dollars", "1200 USD"),
        ("$1.2 million", "1200000 USD"),
        ("€5", "5 EUR"),
        ("5 €", "5 EUR"),
        ("5 euros", "5 EUR"),
        ("EUR 5", "5 EUR"),
        ("£30", "30 GBP"),
        ("C$40", "40 CAD"),
        ("¥500", "500 JPY"),
        ("10 CHF", "10 CHF"),
    ],
)
def test_money(text: str, normal: str) -> None:
    assert _normals(f"it cost {text} then") == [("money", normal)]


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("2024-03-01", "2024-03-01"),
        ("2024-03-01T12:30:00Z", "2024-03-01"),
        ("1 March 2024", "2024-03-01"),
        ("March 1, 2024", "2024-03-01"),
        ("1st of March 2024", "2024-03-01"),
        ("Sept 9 2021", "2021-09-09"),
        ("March 2024", "2024-03"),
        ("03/01/2024", "2024-03-01 or 2024-01-03"),
        ("13/01/2024", "2024-01-13"),
    ],
)
def test_dates(text: str, normal: str) -> None:
    assert _normals(f"on {text} it began") == [("date", normal)]


def test_a_date_that_is_no_day_is_read_as_its_numbers() -> None:
    assert _normals("2023-02-30") == [("number", "2023"), ("number", "2"), ("number", "30")]


def test_identifiers_and_versions() -> None:
    assert _normals("call_1 sha256 v2 0e73c2a3 and 3.12.1 but 3.12") == [
        ("version", "3.12.1"),
        ("number", "3.12"),
    ]


def test_what_is_not_recognized() -> None:
    # number words, comma decimals, exponents, dates without a year, lower-case months
    assert _normals("five people") == []
    assert _normals("1,5 kg") == [("number", "1"), ("number", "5 kg")]
    assert _normals("1.5e3") == []
    assert _normals("a .5 share") == []
    assert _normals("on 1 March it began") == [("number", "1")]
    assert _normals("on march 1 2024") == [("number", "1"), ("number", "2024")]


def test_offsets_in_bytes_count_utf8_bytes() -> None:
    data = "Ø café: €5 on 1 März, 2024-03-01".encode()
    found = details_in_bytes(data)
    assert [(d.normal, data[d.start : d.end].decode()) for d in found] == [
        ("5 EUR", "€5"),
        ("1", "1"),
        ("2024-03-01", "2024-03-01"),
    ]


def test_offsets_survive_invalid_utf8() -> None:
    data = b"\xff\xfe 12% \xe2\x82\xac7"
    found = details_in_bytes(data)
    assert [(d.normal, data[d.start : d.end]) for d in found] == [
        ("12 %", b"12%"),
        ("7 EUR", b"\xe2\x82\xac7"),
    ]


@pytest.mark.parametrize(
    ("stated", "found", "supported"),
    [
        ("5 km", "5 km", True),
        ("5 km", "5 kilometres", True),
        ("5 km", "5 miles", False),
        ("5 km", '{"distance_km": 5}', True),  # a bare number: the unit may be a key
        ("5", "5 miles", True),
        ("12%", "12 percent", True),
        ("12%", "12 km", False),
        ("$1,200", "USD 1200", True),
        ("$1,200", "1,200 EUR", False),
        ("1 March 2024", "2024-03-01", True),
        ("March 2024", "2024-03-01", True),
        ("1 March 2024", "March 2024", False),
        ("1814", "17 May 1814", True),
        ("1814 km", "17 May 1814", False),
        ("January 3, 2024", "03/01/2024", True),
        ("3.12", "3.12.1", False),
        ("3.12.1", "3.12.1", True),
    ],
)
def test_supported_by(stated: str, found: str, supported: bool) -> None:
    (asked,) = extract_details(stated)
    assert any(supported_by(asked, there) for there in extract_details(found)) is supported


def test_normal_number_refuses_what_is_no_number() -> None:
    with pytest.raises(ValueError, match=r"number '1e3': expected digits"):
        normal_number("1e3")
    with pytest.raises(ValueError, match=r"scale 'zillion'"):
        normal_number("1", "zillion")


_PIECES = st.sampled_from(
    [
        "1,200",
        "$5",
        "€7",
        "12%",
        "5 km",
        "2024-03-01",
        "1 March 2024",
        "3.12.1",
        "-4",
        "é",
        "Ø",
        "\n",
    ]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12))
def test_byte_offsets_always_slice_the_detail_as_written(parts: list[str]) -> None:
    text = " ".join(parts)
    data = text.encode("utf-8", "surrogatepass")
    for detail in details_in_bytes(data):
        assert data[detail.start : detail.end] == detail.text.encode("utf-8", "surrogatepass")
    for detail in extract_details(text):
        assert text[detail.start : detail.end] == detail.text


@given(st.binary(max_size=64))
def test_any_bytes_are_read_without_error(data: bytes) -> None:
    for detail in details_in_bytes(data):
        assert 0 <= detail.start < detail.end <= len(data)
