r"""``evidence.idx``: the sorted index of a run's ``evidence.pack``, as git's pack ``.idx``.

The file is::

    toolproof-evidence-index 1\n                     the header line (27 bytes)
    <64 hex> <16 hex offset> <16 hex size>\n          one record per item, 99 bytes each
    ...

Records are sorted by digest, each digest once; ``offset`` is the byte offset of the
item's first byte in ``evidence.pack`` (just after its ``<hex> <size>`` line) and
``size`` its size, both as 16 lowercase hex digits (any offset a file can have). Fixed
width makes record ``i`` start at byte ``27 + 99 * i``: one item is found by binary
search over a read-only memory map of the file, touching about ``log2(n)`` records and
never loading the index; a walk over every record reads the file front to back in
blocks. Every record and every rule is checked where it is read: a record that is not
``<64 hex> <16 hex> <16 hex>``, one not after the one before it, one pointing past the
pack's end are refused in one line naming the file, the byte offset and the rule.
"""

from __future__ import annotations

import mmap
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path

from toolproof.contract.layout import EVIDENCE_INDEX_FILE, EVIDENCE_PACK_FILE
from toolproof.errors import VerificationError
from toolproof.identity import digest

__all__ = ["INDEX_HEADER", "RECORD_BYTES", "PackIndex", "index_record", "write_index"]

INDEX_HEADER = b"toolproof-evidence-index 1\n"
"""The first line of every index: the format and its version."""
RECORD_BYTES = 64 + 1 + 16 + 1 + 16 + 1
"""The width of one record (99 bytes)."""
_RECORD = re.compile(rb"([0-9a-f]{64}) ([0-9a-f]{16}) ([0-9a-f]{16})\n")
_RECORD_TEXT = "'<64 hex> <16 hex offset> <16 hex size>'"
_WALK_RECORDS = 10_000
"""Records read per block when the index is walked (about 1 MB)."""


def index_record(hex_digest: str, offset: int, size: int) -> bytes:
    """The 99-byte record of an item: ``<64 hex> <16 hex offset> <16 hex size>`` and LF."""
    return b"%s %016x %016x\n" % (hex_digest.encode("ascii"), offset, size)


def write_index(path: Path, entries: Iterable[tuple[str, int, int]]) -> tuple[int, str]:
    """Create the index ``path`` (it must not exist) of ``(hex, offset, size)`` entries.

    Args:
        path: the ``evidence.idx`` to create.
        entries: one per item of the pack, in any order; sorted here.

    Returns:
        The file's size in bytes and ``sha256:<hex>``.

    Raises:
        ValueError: a digest is given twice (a pack stores each digest once).
        OSError: the file cannot be written (it names the file).

    """
    ordered = sorted(entries)
    for before, after in pairwise(ordered):
        if before[0] == after[0]:
            raise ValueError(f"{path}: evidence {before[0]} is indexed twice")
    data = INDEX_HEADER + b"".join(index_record(*entry) for entry in ordered)
    try:
        with Path(path).open("xb") as file:
            file.write(data)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    return len(data), digest(data)


def _refuse(at: int, rule: str) -> VerificationError:
    return VerificationError(
        f"{EVIDENCE_INDEX_FILE} at byte {at}: {rule}", file=EVIDENCE_INDEX_FILE
    )


class PackIndex:
    """A run's ``evidence.idx``, checked against the size of its ``evidence.pack``.

    Args:
        path: the index file.
        pack_size: the size in bytes of the pack it indexes.

    Attributes:
        count: the number of records.

    Raises:
        VerificationError: the file does not start with :data:`INDEX_HEADER`, or its
            length is not the header plus whole records.
        OSError: the file cannot be read.

    """

    def __init__(self, path: Path, pack_size: int) -> None:
        self.path = Path(path)
        self.pack_size = pack_size
        with self.path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            if file.read(len(INDEX_HEADER)) != INDEX_HEADER:
                raise _refuse(
                    0, f"does not start with its header line {INDEX_HEADER[:-1].decode()!r}"
                )
            body = size - len(INDEX_HEADER)
            if body % RECORD_BYTES:
                at = size - body % RECORD_BYTES
                raise _refuse(at, f"ends inside a record (records are {RECORD_BYTES} bytes)")
            self.count = body // RECORD_BYTES
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if self.count else None

    def _record(self, number: int, record: bytes) -> tuple[str, int, int]:
        """Parse record ``number`` (from 0); check its form and that it lies within the pack."""
        at = len(INDEX_HEADER) + number * RECORD_BYTES
        matched = _RECORD.fullmatch(record)
        if matched is None:
            raise _refuse(at, f"record {number + 1} is not {_RECORD_TEXT}")
        name = matched.group(1).decode("ascii")
        offset, size = int(matched.group(2), 16), int(matched.group(3), 16)
        if offset + size > self.pack_size:
            raise _refuse(
                at,
                f"record {number + 1} ({name}) points past the end of {EVIDENCE_PACK_FILE} "
                f"(bytes [{offset}, {offset + size}) of a {self.pack_size}-byte pack)",
            )
        return name, offset, size

    def find(self, hex_digest: str) -> tuple[int, int] | None:
        """The ``(offset, size)`` of the item of ``hex_digest`` in the pack, or ``None``.

        Binary search over the memory map: about ``log2(count)`` records are read.

        Raises:
            VerificationError: a record read on the way is malformed, or the one found
                points past the pack's end.

        """
        key = hex_digest.encode("ascii")
        view, low, high = self._map, 0, self.count
        while low < high and view is not None:
            middle = (low + high) // 2
            start = len(INDEX_HEADER) + middle * RECORD_BYTES
            name = view[start : start + 64]
            if name == key:
                _, offset, size = self._record(middle, view[start : start + RECORD_BYTES])
                return offset, size
            if name < key:
                low = middle + 1
            else:
                high = middle
        return None

    def walk(self) -> Iterator[tuple[str, int, int]]:
        """Every record in file order, checked: its form, its order, its bounds.

        Read front to back in blocks of about 1 MB.

        Raises:
            VerificationError: a record is malformed, not after the one before it (the
                records are sorted by digest, each digest once), or points past the end
                of the pack.
            OSError: the file cannot be read.

        """
        previous = ""
        number = 0
        with self.path.open("rb") as file:
            file.seek(len(INDEX_HEADER))
            while block := file.read(RECORD_BYTES * _WALK_RECORDS):
                for start in range(0, len(block), RECORD_BYTES):
                    name, offset, size = self._record(number, block[start : start + RECORD_BYTES])
                    if name <= previous:
                        at = len(INDEX_HEADER) + number * RECORD_BYTES
                        rule = "repeats" if name == previous else "sorts before"
                        raise _refuse(
                            at,
                            f"record {number + 1} ({name}) {rule} the digest of record "
                            f"{number} (records are sorted by digest, each digest once)",
                        )
                    previous = name
                    number += 1
                    yield name, offset, size

    def check(self, offsets: array[int], sizes: array[int], digests: bytearray) -> None:
        """Check that the records are exactly the pack's items, one record per item.

        Args:
            offsets: the offset of each item's first byte, in pack order (increasing).
            sizes: the size of each item, in the same order.
            digests: the 32-byte SHA-256 of each item, concatenated in the same order.

        Raises:
            VerificationError: a record (walked with :meth:`walk`) does not name the
                item at its offset with its size, or the index has more or fewer
                records than the pack has items.

        """
        for number, (name, offset, size) in enumerate(self.walk()):
            at = bisect_left(offsets, offset)
            if (
                at == len(offsets)
                or offsets[at] != offset
                or sizes[at] != size
                or digests[32 * at : 32 * at + 32] != bytes.fromhex(name)
            ):
                raise _refuse(
                    len(INDEX_HEADER) + number * RECORD_BYTES,
                    f"record {number + 1} ({name}) does not point at that item of "
                    f"{EVIDENCE_PACK_FILE} (offset {offset}, size {size})",
                )
        if self.count != len(offsets):
            raise _refuse(
                len(INDEX_HEADER) + self.count * RECORD_BYTES,
                f"has {self.count} records, {EVIDENCE_PACK_FILE} holds {len(offsets)} items "
                "(each item has exactly one record)",
            )
