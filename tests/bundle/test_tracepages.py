"""Pages of a trace file by cursor and by position, reading only what a page needs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from toolproof.bundle.tracepages import (
    OversizedLine,
    TraceCursor,
    TraceLocator,
    TracePage,
    read_page,
)
from toolproof.errors import InputError


def _trace(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def _lines(count: int) -> list[bytes]:
    # lines of different lengths, so offsets are not a multiple of anything
    return [b'{"idx":%d,"pad":"%s"}\n' % (i, b"x" * (i % 37)) for i in range(count)]


def _offsets(lines: list[bytes]) -> list[int]:
    offsets, at = [], 0
    for line in lines:
        offsets.append(at)
        at += len(line)
    return offsets


def test_following_cursors_gives_every_line_once_in_order(tmp_path: Path) -> None:
    lines = _lines(1000)
    path = _trace(tmp_path, lines)
    offsets = _offsets(lines)
    cursor: TraceCursor | None = TraceCursor(0, 0)
    got: list[bytes] = []
    starts: list[TraceCursor] = []
    while cursor is not None:
        page = read_page(path, cursor, limit=300, max_bytes=1 << 20, block_bytes=4096)
        starts.append(page.start)
        got += page.lines
        cursor = page.next
    assert got == lines
    assert starts == [TraceCursor(p, offsets[p]) for p in (0, 300, 600, 900)]


def test_a_page_reads_its_bytes_and_at_most_one_block_more(tmp_path: Path) -> None:
    lines = _lines(20_000)
    path = _trace(tmp_path, lines)
    offsets = _offsets(lines)
    cursor = TraceCursor(15_000, offsets[15_000])
    page = read_page(path, cursor, limit=50, max_bytes=1 << 20, block_bytes=4096)
    assert page.lines == tuple(lines[15_000:15_050])
    assert page.next == TraceCursor(15_050, offsets[15_050])
    size = sum(len(line) for line in page.lines)
    assert size <= page.bytes_read <= size + 4096
    assert page.bytes_read < path.stat().st_size // 100


def test_the_byte_limit_ends_a_page_before_the_line_that_would_pass_it(tmp_path: Path) -> None:
    lines = [b"a" * 9 + b"\n", b"b" * 9 + b"\n", b"c" * 9 + b"\n"]
    path = _trace(tmp_path, lines)
    page = read_page(path, TraceCursor(0, 0), limit=10, max_bytes=25)
    assert (page.lines, page.next) == ((lines[0], lines[1]), TraceCursor(2, 20))
    assert read_page(path, TraceCursor(2, 20), limit=10, max_bytes=25).lines == (lines[2],)


def test_a_line_over_the_byte_limit_is_named_and_skipped(tmp_path: Path) -> None:
    lines = [b"a\n", b"b" * 99 + b"\n", b"c\n"]
    path = _trace(tmp_path, lines)
    first = read_page(path, TraceCursor(0, 0), limit=10, max_bytes=50)
    assert (first.lines, first.next) == ((b"a\n",), TraceCursor(1, 2))
    big = read_page(path, TraceCursor(1, 2), limit=10, max_bytes=50, block_bytes=16)
    assert big == TracePage(
        TraceCursor(1, 2), (), TraceCursor(2, 102), big.bytes_read, OversizedLine(1, 2, 100)
    )
    assert read_page(path, TraceCursor(2, 102), limit=10, max_bytes=50).lines == (b"c\n",)


def test_a_last_line_without_a_newline_is_served_as_stored(tmp_path: Path) -> None:
    path = _trace(tmp_path, [b"one\n", b"tw"])
    page = read_page(path, TraceCursor(0, 0), limit=10, max_bytes=100)
    assert (page.lines, page.next) == ((b"one\n", b"tw"), None)
    assert TraceLocator().cursor_at(path, 1) == TraceCursor(1, 4)
    assert TraceLocator().cursor_at(path, 2) is None


def test_the_end_of_the_file_is_an_empty_last_page(tmp_path: Path) -> None:
    path = _trace(tmp_path, [b"one\n"])
    page = read_page(path, TraceCursor(1, 4), limit=10, max_bytes=100)
    assert (page.lines, page.next) == ((), None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "12",
            "cursor '12' is not a trace cursor: expected POSITION@OFFSET, two whole "
            "numbers (as X-Next-Cursor gives them)",
        ),
        (
            "01@4",
            "cursor '01@4' is not a trace cursor: expected POSITION@OFFSET, two whole "
            "numbers (as X-Next-Cursor gives them)",
        ),
        (
            "-1@4",
            "cursor '-1@4' is not a trace cursor: expected POSITION@OFFSET, two whole "
            "numbers (as X-Next-Cursor gives them)",
        ),
    ],
)
def test_a_malformed_cursor_is_refused(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        TraceCursor.parse(text)
    assert caught.value.message == message


def test_a_cursor_must_point_at_the_start_of_a_line_inside_the_file(tmp_path: Path) -> None:
    path = _trace(tmp_path, [b"one\n", b"two\n"])
    assert TraceCursor.parse("1@4") == TraceCursor(1, 4)
    with pytest.raises(InputError) as inside:
        read_page(path, TraceCursor(1, 5), limit=1, max_bytes=100)
    assert inside.value.message == (
        "cursor 1@5: byte 5 of trace.jsonl is not the start of a line "
        "(the byte before it is not a newline)"
    )
    with pytest.raises(InputError) as past:
        read_page(path, TraceCursor(2, 9), limit=1, max_bytes=100)
    assert past.value.message == "cursor 2@9: byte 9 is past the end of trace.jsonl (8 bytes)"


def test_the_locator_finds_every_line_and_remembers_its_checkpoints(tmp_path: Path) -> None:
    lines = _lines(5000)
    path = _trace(tmp_path, lines)
    offsets = _offsets(lines)
    locator = TraceLocator(block_bytes=4096)
    assert locator.cursor_at(path, 0) == TraceCursor(0, 0)
    assert locator.bytes_read == 0  # the first line is found without a read
    assert locator.cursor_at(path, 4000) == TraceCursor(4000, offsets[4000])
    first_scan = locator.bytes_read
    assert first_scan >= offsets[4000]  # one pass up to the line
    for position in (3999, 17, 4001, 2500):  # inside the part scanned: one block each
        before = locator.bytes_read
        assert locator.cursor_at(path, position) == TraceCursor(position, offsets[position])
        assert locator.bytes_read - before <= 2 * 4096
    assert [locator.cursor_at(path, p) for p in range(4990, 5001)] == [
        *(TraceCursor(p, offsets[p]) for p in range(4990, 5000)),
        None,
    ]


def test_a_changed_file_is_scanned_again(tmp_path: Path) -> None:
    path = _trace(tmp_path, [b"a\n", b"b\n"])
    locator = TraceLocator()
    assert locator.cursor_at(path, 1) == TraceCursor(1, 2)
    path.write_bytes(b"aaaa\nb\n")
    assert locator.cursor_at(path, 1) == TraceCursor(1, 5)


def test_one_locator_serves_threads_over_several_files(tmp_path: Path) -> None:
    files = []
    for name, count in (("a", 3000), ("b", 4000)):
        lines = _lines(count)
        folder = tmp_path / name
        folder.mkdir()
        files.append((_trace(folder, lines), _offsets(lines)))
    locator = TraceLocator(block_bytes=4096)
    asks = [(k % 2, (k * 997) % 3000) for k in range(400)]

    def ask(index: int, position: int) -> bool:
        path, offsets = files[index]
        return locator.cursor_at(path, position) == TraceCursor(position, offsets[position])

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda a: ask(*a), asks))
    assert answers == [True] * len(asks)
