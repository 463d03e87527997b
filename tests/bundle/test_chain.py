"""``chain``: trace lines spliced and hash-chained in one call (C and Python, one contract).

Held to the lines the bytes format of a :class:`LineShape` writes, each hashed after the
other: random shapes (fragments with ``%``, slots in any order), values (empty, holding
``%``), first ``idx`` up to the top of the range and ``prev``; and to the same
``TypeError`` / ``ValueError`` (type and message) for every malformed input.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproof.bundle import lines as lines_module
from toolproof.bundle.lines import LineShape, chain_python
from toolproof.bundle.trace import TraceWriter, read_trace
from toolproof.contract.trace import StepStarted, ToolCalled

try:
    from toolproof._jcs import chain as c_chain
except ImportError:  # pragma: no cover - the extension is optional
    c_chain = None  # type: ignore[assignment]

CHAINS: dict[str, Any] = {"python": chain_python}
if c_chain is not None:
    CHAINS["c"] = c_chain
IDX_MAX = 2**63 - 1
BYTES = st.binary(max_size=40) | st.sampled_from([b"", b"%", b"%%", b"%(idx)b", b"%d"])


def old_chain(
    prev_json: bytes, idx: int, shaped: list[tuple[bytes, dict[bytes, bytes]]]
) -> tuple[bytes, bytes]:
    """The chain as ``fmt % slots`` then SHA-256 of each line (before ``chain``)."""
    out = b""
    for fmt, slots in shaped:
        line = fmt % {**slots, b"idx": b"%d" % idx, b"prev": prev_json}
        out += line + b"\n"
        prev_json = b'"sha256:' + hashlib.sha256(line).hexdigest().encode() + b'"'
        idx += 1
    return out, prev_json


@st.composite
def shapes(draw: st.DrawFn) -> tuple[tuple[bytes, ...], bytes, list[bytes]]:
    """A random ``code``, the bytes format of the same line, and its value slots' keys."""
    kinds = draw(st.lists(st.sampled_from(b"ipv"), max_size=6).map(bytes))
    fragments = draw(st.lists(BYTES, min_size=len(kinds) + 1, max_size=len(kinds) + 1))
    fmt, keys = fragments[0].replace(b"%", b"%%"), []
    for n, kind in enumerate(kinds):
        if kind == ord("v"):
            keys.append(b"v%d" % n)
            fmt += b"%(" + keys[-1] + b")b"
        else:
            fmt += b"%(idx)b" if kind == ord("i") else b"%(prev)b"
        fmt += fragments[n + 1].replace(b"%", b"%%")
    return (kinds, *fragments), fmt, keys


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(shapes(), st.lists(BYTES, min_size=6, max_size=6)), max_size=12),
    st.integers(min_value=0, max_value=IDX_MAX) | st.integers(min_value=0, max_value=99),
    st.sampled_from([b"null", b'"sha256:' + b"0" * 64 + b'"', b"", b"%"]),
)
def test_chain_is_the_format_then_sha256_chain(
    blocks: list[tuple[tuple[tuple[bytes, ...], bytes, list[bytes]], list[bytes]]],
    idx: int,
    prev: bytes,
) -> None:
    idx = min(idx, IDX_MAX - len(blocks))
    items, shaped = [], []
    for (code, fmt, keys), values in blocks:
        items.append((code, *values[: len(keys)]))
        shaped.append((fmt, dict(zip(keys, values, strict=False))))
    expected = old_chain(prev, idx, shaped)
    for chain in CHAINS.values():
        assert chain(prev, idx, items) == expected


def test_many_lines_of_a_real_shape_match_line_by_line() -> None:
    shape = LineShape(ToolCalled, ("step", "call_id", "call"))
    items = [(shape.code, b'{"n":%d}' % n, b'"c%d"' % n, b'"s"') for n in range(3000)]
    shaped = [(shape.fmt, {b"call": it[1], b"call_id": it[2], b"step": it[3]}) for it in items]
    expected = old_chain(b"null", 10**12, shaped)
    assert expected[0].startswith(b'{"call":{"n":0},"call_id":"c0","idx":1000000000000,"prev":null')
    for chain in CHAINS.values():
        assert chain(b"null", 10**12, items) == expected
    assert lines_module.chain(b"null", 0, []) == (b"", b"null")


def test_a_large_block_is_hashed_without_the_gil_and_still_chained() -> None:
    shape = LineShape(StepStarted, ("step", "kind"))
    big = b'"' + b"x" * 100_000 + b'"'
    items = [(shape.code, b'"call"', big), (shape.code, b'"call"', b'"s"')]
    shaped = [(shape.fmt, {b"kind": b'"call"', b"step": v}) for v in (big, b'"s"')]
    for chain in CHAINS.values():
        assert chain(b"null", 0, items) == old_chain(b"null", 0, shaped)


CODE = (b"ipv", b'{"idx":', b',"prev":', b',"v":', b"}")
BAD: list[tuple[tuple[Any, ...], type[Exception], str]] = [
    (("null", 0, []), TypeError, "chain: prev_json is not bytes"),
    ((b"null", 1.0, []), TypeError, "chain: idx is not an int"),
    ((b"null", True, []), TypeError, "chain: idx is not an int"),
    ((b"null", 0, ()), TypeError, "chain: lines is not a list"),
    ((b"null", -1, []), ValueError, "chain: idx is not in 0 .. 2**63 - 1 - len(lines)"),
    ((b"null", 2**63, []), ValueError, "chain: idx is not in 0 .. 2**63 - 1 - len(lines)"),
    ((b"null", 2**80, []), ValueError, "chain: idx is not in 0 .. 2**63 - 1 - len(lines)"),
    (
        (b"null", IDX_MAX, [(CODE, b"1")]),
        ValueError,
        "chain: idx is not in 0 .. 2**63 - 1 - len(lines)",
    ),
    (
        (b"null", 0, [(CODE, b"1"), [CODE, b"1"]]),
        TypeError,
        "chain: lines[1]: not a tuple (code, value...)",
    ),
    ((b"null", 0, [()]), TypeError, "chain: lines[0]: not a tuple (code, value...)"),
    (
        (b"null", 0, [(b"ipv", b"1")]),
        TypeError,
        "chain: lines[0]: code is not a tuple (kinds, fragment...)",
    ),
    (
        (b"null", 0, [((b"",), b"1")]),
        TypeError,
        "chain: lines[0]: code is not a tuple (kinds, fragment...)",
    ),
    (
        (b"null", 0, [(("ipv", *CODE[1:]), b"1")]),
        TypeError,
        "chain: lines[0]: code's kinds is not bytes",
    ),
    (
        (b"null", 0, [(CODE[:-1], b"1")]),
        ValueError,
        "chain: lines[0]: code does not hold one fragment more than slots",
    ),
    (
        (b"null", 0, [((*CODE[:-1], "}"), b"1")]),
        TypeError,
        "chain: lines[0]: a fragment of code is not bytes",
    ),
    (
        (b"null", 0, [((b"ipx", *CODE[1:]), b"1")]),
        ValueError,
        "chain: lines[0]: a slot kind is not b'i', b'p' or b'v'",
    ),
    ((b"null", 0, [(CODE,)]), ValueError, "chain: lines[0]: fewer values than the code's slots"),
    (
        (b"null", 0, [(CODE, b"1", b"2")]),
        ValueError,
        "chain: lines[0]: more values than the code's slots",
    ),
    ((b"null", 0, [(CODE, "1")]), TypeError, "chain: lines[0]: a value is not bytes"),
    ((b"null", 0, [(CODE, bytearray(b"1"))]), TypeError, "chain: lines[0]: a value is not bytes"),
    ((b"null", 0, [(CODE, None)]), TypeError, "chain: lines[0]: a value is not bytes"),
]


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize(("args", "error", "message"), BAD)
def test_bad_input_raises_the_same_error(
    name: str, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        CHAINS[name](*args)
    assert str(raised.value) == message


@pytest.mark.skipif(c_chain is None, reason="toolproof._jcs is not built")
def test_the_c_chain_is_used_and_takes_exactly_three_arguments() -> None:
    assert lines_module.chain is c_chain
    with pytest.raises(TypeError, match=r"chain\(\) takes 3 arguments \(2 given\)"):
        c_chain(b"null", 0)  # type: ignore[call-arg]


def test_append_chained_keeps_the_writer_chained_with_append_line(tmp_path: Any) -> None:
    shape = LineShape(StepStarted, ("step",), {"kind": "call"})
    writer = TraceWriter(tmp_path / "trace.jsonl", buffer_bytes=0)
    writer.append_chained([(shape.code, b'"a"'), (shape.code, b'"b"')])
    writer.append_line(shape.fmt % {b"idx": b"2", b"prev": writer._prev_json, b"step": b'"c"'})
    writer.append_chained([])
    writer.append_shaped([(shape, {b"step": b'"d"'})])
    with pytest.raises(ValueError, match=r"lines\[0\]: fewer values"):
        writer.append_chained([(shape.code,)])
    assert writer.count == 4
    size, digest = writer.close()
    assert writer.size == size
    data = (tmp_path / "trace.jsonl").read_bytes()
    assert (size, digest) == (len(data), "sha256:" + hashlib.sha256(data).hexdigest())
    lines, problem = read_trace(data)
    assert problem is None
    assert [line.problem for line in lines] == [None] * 4
    assert [line.event.step for line in lines if line.event] == ["a", "b", "c", "d"]
    assert [line.event.prev for line in lines if line.event] == [None] + [
        line.digest for line in lines[:-1]
    ]
