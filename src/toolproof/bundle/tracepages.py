"""Pages of a ``trace.jsonl``, read from anywhere in it without reading the rest.

A run's trace can be gigabytes (about 3.1 kB per recorded tool call), so a reader
that shows it a page at a time must not pay for the lines before the page:

* A **cursor** names where a page starts: the position of its first line (from 0)
  and that line's byte offset in the file, written ``POSITION@OFFSET``
  (``300@482113``: line 300 starts at byte 482,113). :func:`read_page` reads from the
  offset on: a page costs its own bytes plus at most one read block
  (:data:`PAGE_BLOCK_BYTES`), wherever it is in the file, and hands back the cursor of
  the next page. A cursor is checked before it is used: its offset must be in the
  file and be the start of a line (byte 0, or just after a newline); its position is
  taken as given (each event carries its own ``idx``).
* A page asked **by position** alone (line 750,000) needs that line's offset: a
  :class:`TraceLocator` finds it with one pass over the file up to the line, counting
  newlines a block at a time (``bytes.count``, disk speed), and keeps a *checkpoint*
  per block read, the first line starting in that block (two integers per MiB: 3,000
  for a 3 GB trace). The checkpoints of a file are kept in memory, keyed by its device,
  inode, size and modification time (a committed run never changes; a changed file is
  scanned again), so the next position in the part already scanned costs one bisection
  and at most one block read. Nothing is written next to the run: its manifest, and so
  its run id, stay as they are.

Lines are served as stored: nothing here parses or verifies them
(``toolproof verify`` does; see :mod:`toolproof.verify.view`).
"""

from __future__ import annotations

import bisect
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from io import FileIO
from pathlib import Path

from toolproof.bundle.trace import READ_BLOCK_BYTES
from toolproof.errors import InputError

__all__ = [
    "PAGE_BLOCK_BYTES",
    "OversizedLine",
    "TraceCursor",
    "TraceLocator",
    "TracePage",
    "read_page",
]

PAGE_BLOCK_BYTES = 256 * 1024
"""Bytes :func:`read_page` reads at a time (256 KiB)."""

_CURSOR = re.compile(r"^(0|[1-9][0-9]{0,17})@(0|[1-9][0-9]{0,17})$")
CURSOR_RULE = "POSITION@OFFSET, two whole numbers (as X-Next-Cursor gives them)"


@dataclass(frozen=True)
class TraceCursor:
    """Where a page of a trace starts.

    Attributes:
        position: the line's position in the file, from 0 (the event's ``idx`` in a
            sound trace).
        offset: the byte offset of the line's first byte.

    """

    position: int
    offset: int

    def __str__(self) -> str:
        """``POSITION@OFFSET`` (``300@482113``)."""
        return f"{self.position}@{self.offset}"

    @classmethod
    def parse(cls, text: str) -> TraceCursor:
        """Read a cursor written ``POSITION@OFFSET``.

        Raises:
            InputError: ``text`` is not two whole numbers (up to 18 digits, no
                leading zero) joined by ``@``.

        """
        match = _CURSOR.match(text)
        if match is None:
            raise InputError(
                f"cursor {text[:40]!r} is not a trace cursor: expected {CURSOR_RULE}",
                rule="trace cursor",
            )
        return cls(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True)
class OversizedLine:
    """A line that alone is over a page's byte limit.

    Attributes:
        position: its position in the file.
        offset: its first byte's offset.
        size: its length in bytes, its newline included.

    """

    position: int
    offset: int
    size: int


@dataclass(frozen=True)
class TracePage:
    """A page of a trace as :func:`read_page` read it.

    Attributes:
        start: where the page starts.
        lines: its lines, each as stored (with its newline; the file's last line
            without one when the file does not end in a newline).
        next: the next page's cursor, or ``None`` when the page reaches the end.
        bytes_read: bytes read from the file to make the page.
        oversized: the page's first line when it alone is over the byte limit (then
            ``lines`` is empty and ``next`` is the line after it).

    """

    start: TraceCursor
    lines: tuple[bytes, ...]
    next: TraceCursor | None
    bytes_read: int
    oversized: OversizedLine | None = None


def _check_cursor(fd: int, size: int, cursor: TraceCursor, name: str) -> None:
    """Refuse a cursor whose offset is past the file or not the start of a line."""
    if cursor.offset > size:
        raise InputError(
            f"cursor {cursor}: byte {cursor.offset} is past the end of {name} ({size} bytes)",
            rule="trace cursor",
        )
    if cursor.offset and os.pread(fd, 1, cursor.offset - 1) != b"\n":
        raise InputError(
            f"cursor {cursor}: byte {cursor.offset} of {name} is not the start of a line "
            "(the byte before it is not a newline)",
            rule="trace cursor",
        )


def read_page(
    path: Path,
    cursor: TraceCursor,
    *,
    limit: int,
    max_bytes: int,
    block_bytes: int = PAGE_BLOCK_BYTES,
) -> TracePage:
    """Read at most ``limit`` lines and ``max_bytes`` bytes of ``path`` from ``cursor`` on.

    Reads forward from the cursor's offset only, a block at a time: the bytes read are
    the page's plus at most one block (and, for a line over ``max_bytes``, that line,
    counted and not kept). A page holds at least one line unless the file ends at the
    cursor or its first line alone is over ``max_bytes`` (:attr:`TracePage.oversized`).

    Args:
        path: a ``trace.jsonl``.
        cursor: where the page starts (``TraceCursor(0, 0)``: the first line).
        limit: the most lines (1 or more).
        max_bytes: the most bytes, newlines included (1 or more).
        block_bytes: bytes per read.

    Returns:
        The page.

    Raises:
        InputError: the cursor's offset is past the end of the file or not the start
            of a line.
        OSError: the file cannot be read.

    """
    if limit < 1 or max_bytes < 1:
        raise InputError(f"limit {limit} and max_bytes {max_bytes} must be 1 or more")
    with path.open("rb", buffering=0) as file:
        fd = file.fileno()
        size = os.fstat(fd).st_size
        _check_cursor(fd, size, cursor, path.name)
        file.seek(cursor.offset)
        lines: list[bytes] = []
        used = read = 0
        offset = cursor.offset  # of the line being assembled
        parts: list[bytes] = []
        pending = 0  # bytes of that line read so far
        block = b""
        start = 0
        while True:
            end = block.find(b"\n", start)
            if end < 0:
                tail = block[start:]
                if tail:
                    pending += len(tail)
                    if pending <= max_bytes:
                        parts.append(tail)
                block = file.read(block_bytes)
                read += len(block)
                start = 0
                if block:
                    continue
                if not pending:
                    return TracePage(cursor, tuple(lines), None, read)
                line, length = b"".join(parts), pending  # the last line, without a newline
            else:
                length = pending + end - start + 1
                line = b"".join((*parts, block[start : end + 1])) if length <= max_bytes else b""
                start = end + 1
            here = TraceCursor(cursor.position + len(lines), offset)
            if not lines and length > max_bytes:
                after = offset + length
                following = TraceCursor(here.position + 1, after) if after < size else None
                oversized = OversizedLine(here.position, here.offset, length)
                return TracePage(cursor, (), following, read, oversized)
            if used + length > max_bytes:
                return TracePage(cursor, tuple(lines), here, read)
            lines.append(line)
            used += length
            offset += length
            parts.clear()
            pending = 0
            if offset >= size:
                return TracePage(cursor, tuple(lines), None, read)
            if len(lines) == limit:
                return TracePage(cursor, tuple(lines), TraceCursor(here.position + 1, offset), read)


@dataclass
class _Checkpoints:
    """One file's checkpoints: ``(position, offset)`` of the first line in each block scanned."""

    positions: list[int] = field(default_factory=lambda: [0])
    offsets: list[int] = field(default_factory=lambda: [0])
    scanned: int = 0
    """Bytes of the file scanned so far."""
    newlines: int = 0
    """Newlines in those bytes."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the file is scanned (one scan of a file at a time)."""


class TraceLocator:
    """Finds the cursor of line N of a trace file, one forward pass per file, remembered.

    See the module docstring. Safe to share between threads: a lock guards the table of
    files, and each file's own lock its scan (two files are scanned side by side).

    Args:
        capacity: files whose checkpoints are kept (the least recently used goes).
        block_bytes: bytes per read of a scan.

    Attributes:
        bytes_read: bytes read by every scan so far (for tests and benchmarks).

    """

    def __init__(self, capacity: int = 16, block_bytes: int = READ_BLOCK_BYTES) -> None:
        self.capacity = capacity
        self.block_bytes = block_bytes
        self.bytes_read = 0
        self._files: OrderedDict[tuple[int, ...], _Checkpoints] = OrderedDict()
        self._lock = threading.Lock()

    def cursor_at(self, path: Path, position: int) -> TraceCursor | None:
        """The cursor of line ``position`` of ``path``, or ``None`` past its last line.

        Args:
            path: a ``trace.jsonl``.
            position: a line's position, from 0 (a last line without a newline counts).

        Raises:
            InputError: ``position`` is negative.
            OSError: the file cannot be read.

        """
        if position < 0:
            raise InputError(f"line position {position} must be 0 or more")
        with path.open("rb", buffering=0) as file:
            stat = os.fstat(file.fileno())
            size = stat.st_size
            if position == 0:  # the first line: nothing to find
                return TraceCursor(0, 0) if size else None
            key = (stat.st_dev, stat.st_ino, size, stat.st_mtime_ns)
            with self._lock:  # the table only: scans of different files run side by side
                marks = self._files.pop(key, None) or _Checkpoints()
                self._files[key] = marks
                while len(self._files) > self.capacity:
                    self._files.popitem(last=False)
            with marks.lock:
                return self._locate(file, size, marks, position)

    def _locate(
        self, file: FileIO, size: int, marks: _Checkpoints, position: int
    ) -> TraceCursor | None:
        """Scan ``file`` on from ``marks`` as far as ``position`` needs, then walk to it."""
        # scan on until a checkpoint lies past the line, or the file ends
        while marks.positions[-1] <= position and marks.scanned < size:
            file.seek(marks.scanned)
            block = file.read(self.block_bytes)
            if not block:
                break
            self.bytes_read += len(block)
            first = block.find(b"\n")
            if first >= 0 and marks.scanned + first + 1 < size:
                marks.positions.append(marks.newlines + 1)
                marks.offsets.append(marks.scanned + first + 1)
            marks.newlines += block.count(b"\n")
            marks.scanned += len(block)
        at = bisect.bisect_right(marks.positions, position) - 1
        return self._walk(file, size, marks.positions[at], marks.offsets[at], position)

    def _walk(
        self, file: FileIO, size: int, line: int, offset: int, position: int
    ) -> TraceCursor | None:
        """From line ``line`` at ``offset``, the cursor of line ``position`` (forward)."""
        file.seek(offset)
        base = offset
        while line < position:
            block = file.read(self.block_bytes)
            if not block:
                return None
            self.bytes_read += len(block)
            count = block.count(b"\n")
            if line + count < position:
                line += count
                base += len(block)
                continue
            start = 0
            while line < position:
                start = block.find(b"\n", start) + 1
                line += 1
            offset = base + start
            break
        return TraceCursor(position, offset) if offset < size else None
