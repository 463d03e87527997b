"""The details a sentence states: numbers (with units), dates, percentages, money amounts.

:func:`extract_details` finds them in English text and gives each a normal form, so
that the same fact written two ways compares equal; :func:`details_in_bytes` does the
same over evidence bytes with byte offsets; :func:`supported_by` says whether a detail
found in evidence supports a detail an answer states. docs/grounding.md has the
table of normal forms and what is not recognized.

* **number**: ``1,000`` / ``1000`` / ``1000.0`` → ``1000``; ``-5``; ``1.2 million`` →
  ``1200000`` (``thousand``, ``million``, ``billion``, ``trillion``). A listed unit
  after it is part of the detail (``5 km``, ``5 kilometres`` → ``5 km``); units are
  never converted (``5 km`` is not ``5000 m``).
* **percent**: ``12%``, ``12 %``, ``12 percent``, ``12 per cent`` → ``12 %``.
* **money**: ``$1,200``, ``USD 1200``, ``1,200 dollars``, ``1200 USD`` → ``1200 USD``
  (``$`` and ``dollars`` are US dollars; ``C$``, ``A$`` and ISO codes name others).
* **date**: ``2024-03-01``, ``1 March 2024``, ``March 1, 2024``, ``1st of March
  2024``, ``Mar 1 2024`` → ``2024-03-01``; ``March 2024`` → ``2024-03``; a slashed
  ``03/01/2024`` has both readings (month first and day first) when both are dates.
* **version**: digits with two or more dots (``3.12.1``, ``10.0.0.1``), compared as
  written.

Every detail is found only where it does not touch a letter, a digit or ``_`` (so
``call_1``, ``sha256``, ``v2``, ``0e73c2a3`` hold none).
"""

from __future__ import annotations

import bisect
import datetime
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

import regex

__all__ = [
    "CURRENCIES",
    "UNITS",
    "Detail",
    "DetailKind",
    "details_in_bytes",
    "extract_details",
    "normal_number",
    "supported_by",
]

DetailKind = Literal["number", "percent", "money", "date", "version"]

_UNIT_WORDS: dict[str, tuple[str, ...]] = {
    "km": ("kilometer", "kilometers", "kilometre", "kilometres"),
    "m": ("meter", "meters", "metre", "metres"),
    "cm": ("centimeter", "centimeters", "centimetre", "centimetres"),
    "mm": ("millimeter", "millimeters", "millimetre", "millimetres"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "in": ("inch", "inches"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"),
    "lb": ("lbs",),
    "l": ("liter", "liters", "litre", "litres", "L"),
    "ml": ("milliliter", "milliliters", "millilitre", "millilitres", "mL"),
    "ms": ("millisecond", "milliseconds"),
    "s": ("sec", "secs", "second", "seconds"),
    "min": ("mins", "minute", "minutes"),
    "h": ("hr", "hrs", "hour", "hours"),
    "d": ("day", "days"),
    "wk": ("week", "weeks"),
    "mo": ("month", "months"),
    "yr": ("yrs", "year", "years"),
    "B": ("byte", "bytes"),
    "KB": ("kB",),
    "MB": (),
    "GB": (),
    "TB": (),
    "KiB": (),
    "MiB": (),
    "GiB": (),
    "°C": ("℃",),
    "°F": ("℉",),
    "km/h": ("kph",),
    "mph": (),
}
UNITS: dict[str, str] = {
    alias: unit
    for unit, aliases in _UNIT_WORDS.items()
    for alias in (unit, *aliases)
    if alias != "in"  # "5 in 10" is no length: inches are "inch" or "inches"
}
"""Each recognized unit spelling → its canonical unit (``kilometres`` → ``km``)."""

CURRENCIES: dict[str, str] = {
    "$": "USD",
    "US$": "USD",
    "C$": "CAD",
    "A$": "AUD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "dollar": "USD",
    "dollars": "USD",
    "euro": "EUR",
    "euros": "EUR",
    "yen": "JPY",
    **{
        code: code
        for code in ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "CNY", "INR", "NOK", "SEK")
    },
}
"""Each recognized currency spelling → its ISO 4217 code (``$`` and ``dollars`` → ``USD``)."""

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_OF = {name: number for number, name in enumerate(_MONTHS, start=1)}
_MONTH_OF.update({name[:3]: number for name, number in list(_MONTH_OF.items())})
_MONTH_OF["Sept"] = 9
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}


def _alternation(words: Iterable[str]) -> str:
    """A regex alternation of ``words``, longest first (so ``km/h`` is tried before ``km``)."""
    unique = sorted(set(words), key=lambda word: (-len(word), word))
    return "|".join(regex.escape(word) for word in unique)


_MONTH = rf"(?P<{{0}}>{_alternation(_MONTH_OF)})\.?"
_NUM = r"(?P<{0}>[-+\u2212]?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?)"
_SCALE = rf"(?:\s+(?P<{{0}}>{_alternation(_SCALES)}))?"
_START = r"(?<![\w.$€£¥])"
_END = r"(?!\w|\.\d)"
_SYMBOLS = [c for c in CURRENCIES if not c.isalpha()]
_WORDS = [c for c in CURRENCIES if c.isalpha()]
_UNIT_SYMBOLS = [u for u in UNITS if not u.isalpha() or len(u) <= 3 or u.isupper()]
_UNIT_NAMES = [u for u in UNITS if u not in _UNIT_SYMBOLS]


@functools.cache
def _pattern() -> regex.Pattern[str]:
    """The one pattern of every detail kind, compiled on first use (compiling costs ~0.2 s)."""
    return regex.compile(
        "|".join(
            [
                rf"{_START}(?P<iso>(?P<iy>\d{{4}})-(?P<im>\d{{2}})-(?P<id>\d{{2}}))"
                r"(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w-])",
                rf"{_START}(?P<dmy>(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?"
                rf"{_MONTH.format('dm')},?\s+(?P<dy>\d{{4}}))(?!\w)",
                rf"(?<!\w)(?P<mdy>{_MONTH.format('mm')}\s+(?P<md>\d{{1,2}})(?:st|nd|rd|th)?,?\s+"
                r"(?P<my>\d{4}))(?!\w)",
                rf"(?<!\w)(?P<ym>{_MONTH.format('ym_m')},?\s+(?P<ym_y>\d{{4}}))(?!\w)",
                r"(?<![\w/])(?P<slash>(?P<s1>\d{1,2})/(?P<s2>\d{1,2})/(?P<s3>\d{4}))(?![\w/])",
                r"(?<![\w.])(?P<version>\d+(?:\.\d+){2,})(?!\w|\.\d)",
                rf"(?<!\w)(?P<cur1>{_alternation(_SYMBOLS)}|(?:{_alternation(CURRENCIES.values())})\s?)"
                rf"\s?{_NUM.format('n1')}{_SCALE.format('k1')}{_END}",
                rf"{_START}{_NUM.format('n2')}{_SCALE.format('k2')}(?:"
                r"\s?(?P<pct>%|(?i:per\s?cent)(?!\w))"
                rf"|\s?(?P<cur2>{_alternation(c for c in _SYMBOLS if c in '€£¥')})"
                rf"|\s(?P<cur3>(?i:{_alternation(_WORDS)})|{_alternation(CURRENCIES.values())})(?!\w)"
                rf"|\s?(?P<unit>{_alternation(_UNIT_SYMBOLS)}|(?i:{_alternation(_UNIT_NAMES)}))(?![\w/])"
                rf"|{_END})",
            ]
        )
    )


@functools.cache
def _number_only() -> regex.Pattern[str]:
    """The pattern of a bare number, compiled on first use."""
    return regex.compile(rf"{_START}{_NUM.format('n')}{_END}")


@dataclass(frozen=True)
class Detail:
    """One detail of a text, where it is and what it means.

    Attributes:
        kind: ``number``, ``percent``, ``money``, ``date`` or ``version``.
        text: the detail as written (``$1,200``, ``1 March 2024``).
        start: its first position (characters in a text, bytes in evidence bytes).
        end: the position after it (exclusive).
        value: its normal value: a number (``1200``, ``-0.5``), a date
            (``2024-03-01``, ``2024-03``) or a version as written.
        unit: the canonical unit: a :data:`UNITS` value, ``%`` (a percent), an ISO
            4217 code (money); ``None`` for a bare number, a date or a version.
        readings: every date the text may mean (``value`` first; two for a slashed
            date read both ways); ``(value,)`` for any other kind.

    """

    kind: DetailKind
    text: str
    start: int
    end: int
    value: str
    unit: str | None = None
    readings: tuple[str, ...] = ()

    @property
    def normal(self) -> str:
        """The normal form: ``1200 USD``, ``12 %``, ``5 km``, ``1000``, ``2024-03-01``."""
        if self.kind == "date" and len(self.readings) > 1:
            return " or ".join(self.readings)
        return self.value if self.unit is None else f"{self.value} {self.unit}"


def normal_number(digits: str, scale: str | None = None) -> str:
    """The normal form of a written number: no separators, no trailing zeros, no exponent.

    Args:
        digits: ``1,200.50``, ``-3``, ``+4``, ``\u22127`` (U+2212 minus): optional sign,
            digits with optional comma thousands groups, optional decimal part.
        scale: ``thousand``, ``million``, ``billion`` or ``trillion`` (any case), or
            ``None``.

    Returns:
        The shortest plain decimal: ``1200.5``, ``-3``, ``4``, ``1200000`` for
        (``1.2``, ``million``); ``0`` for any zero.

    Raises:
        ValueError: ``digits`` is not such a number, or ``scale`` is not listed.

    """
    text = digits.replace(",", "").replace("\u2212", "-")
    if not regex.fullmatch(r"[-+]?\d+(?:\.\d+)?", text):
        raise ValueError(f"number {digits!r}: expected digits with optional sign and decimals")
    value = Decimal(text)
    if scale is not None:
        if scale.lower() not in _SCALES:
            raise ValueError(f"scale {scale!r}: expected one of {sorted(_SCALES)}")
        value = value.scaleb(_SCALES[scale.lower()])
    if value == 0:
        return "0"
    return format(value.normalize(), "f")


def _date(year: str, month: int, day: str | None) -> str | None:
    try:
        if day is None:
            datetime.date(int(year), month, 1)
            return f"{int(year):04d}-{month:02d}"
        return datetime.date(int(year), month, int(day)).isoformat()
    except ValueError:
        return None


def _dated(found: regex.Match[str]) -> tuple[str, ...] | None:
    """The readings of a matched date, ``None`` when it names no real day."""
    if found.group("iso"):
        reading = _date(found.group("iy"), int(found.group("im")), found.group("id"))
    elif found.group("dmy"):
        reading = _date(found.group("dy"), _MONTH_OF[found.group("dm")], found.group("dd"))
    elif found.group("mdy"):
        reading = _date(found.group("my"), _MONTH_OF[found.group("mm")], found.group("md"))
    elif found.group("ym"):
        reading = _date(found.group("ym_y"), _MONTH_OF[found.group("ym_m")], None)
    else:
        first, second, year = found.group("s1", "s2", "s3")
        both = (_date(year, int(first), second), _date(year, int(second), first))
        readings = tuple(dict.fromkeys(r for r in both if r is not None))
        return readings or None
    return None if reading is None else (reading,)


def _numbers(text: str, start: int, end: int) -> Iterator[Detail]:
    for found in _number_only().finditer(text, start, end):
        value = normal_number(found.group("n"))
        yield Detail("number", found.group(), found.start(), found.end(), value, None, (value,))


def _detail(found: regex.Match[str]) -> Detail:
    text, start, end = found.group(), found.start(), found.end()
    if found.group("version"):
        return Detail("version", text, start, end, text, None, (text,))
    if found.group("n1"):
        value = normal_number(found.group("n1"), found.group("k1"))
        currency = CURRENCIES[found.group("cur1").strip()]
        return Detail("money", text, start, end, value, currency, (value,))
    value = normal_number(found.group("n2"), found.group("k2"))
    kind: DetailKind = "number"
    unit = None
    if found.group("pct"):
        kind, unit = "percent", "%"
    elif found.group("cur2") or found.group("cur3"):
        word = found.group("cur2") or found.group("cur3")
        kind, unit = "money", CURRENCIES.get(word, CURRENCIES.get(word.lower(), word))
    elif found.group("unit"):
        word = found.group("unit")
        unit = UNITS.get(word) or UNITS[word.lower()]
    return Detail(kind, text, start, end, value, unit, (value,))


def extract_details(text: str, start: int = 0, end: int | None = None) -> list[Detail]:
    """Every detail of ``text[start:end]``, in order, with character offsets into ``text``.

    Args:
        text: English text (an answer's sentence, or decoded evidence).
        start: where to begin (characters).
        end: where to stop (exclusive); ``None``: the end of ``text``.

    Returns:
        The details, non-overlapping, left to right. A written date that names no
        real day (``2023-02-30``) is read as the numbers in it.

    """
    stop = len(text) if end is None else end
    out: list[Detail] = []
    for found in _pattern().finditer(text, start, stop):
        if found.group("n1") or found.group("n2") or found.group("version"):
            out.append(_detail(found))
            continue
        readings = _dated(found)
        if readings is None:
            out.extend(_numbers(text, found.start(), found.end()))
        else:
            where = (found.start(), found.end())
            out.append(Detail("date", found.group(), *where, readings[0], None, readings))
    return out


def details_in_bytes(data: bytes) -> list[Detail]:
    """The details of evidence bytes, their ``start``/``end`` in bytes of ``data``.

    Args:
        data: UTF-8 text (an invalid byte is kept as one character that matches
            nothing, so offsets stay exact).

    Returns:
        The details of :func:`extract_details`, offsets converted to byte offsets.

    """
    text = data.decode("utf-8", "surrogateescape")
    found = extract_details(text)
    if text.isascii():
        return found
    wide: list[int] = []  # positions of characters longer than one byte
    extra: list[int] = []  # bytes beyond one per character, up to and including each
    total = 0
    for at in regex.finditer(r"[^\x00-\x7f]", text):
        point = ord(at.group())
        size = 1 if 0xDC80 <= point <= 0xDCFF else len(at.group().encode("utf-8"))
        if size > 1:
            total += size - 1
            wide.append(at.start())
            extra.append(total)

    def byte(index: int) -> int:
        before = bisect.bisect_left(wide, index)
        return index + (extra[before - 1] if before else 0)

    return [
        Detail(d.kind, d.text, byte(d.start), byte(d.end), d.value, d.unit, d.readings)
        for d in found
    ]


def supported_by(stated: Detail, found: Detail) -> bool:
    """Whether ``found`` (a detail of evidence) supports ``stated`` (a detail of an answer).

    * A number, percent or money amount: the same normal value, and units that agree:
      the same unit, or no unit on either side (a bare ``5`` in a result supports
      ``5 km``: the unit may be a field's name; ``5 km`` and ``5 mi`` never agree).
      A bare four-digit number is also supported by a date in that year.
    * A date: one of its readings equals one of the found date's readings, or a
      month (``2024-03``) contains the found day.
    * A version: the same text.

    Args:
        stated: what the answer says.
        found: a detail of the cited evidence.

    Returns:
        ``True`` when ``found`` supports ``stated``.

    """
    if stated.kind == "version" or found.kind == "version":
        return stated.kind == found.kind and stated.value == found.value
    if stated.kind == "date":
        if found.kind != "date":
            return False
        offered = set(found.readings) | {reading[:7] for reading in found.readings}
        return any(reading in offered for reading in stated.readings)
    if found.kind == "date":
        return (
            stated.kind == "number"
            and stated.unit is None
            and any(reading[:4] == stated.value for reading in found.readings)
        )
    units_agree = stated.unit is None or found.unit is None or stated.unit == found.unit
    return units_agree and stated.value == found.value
