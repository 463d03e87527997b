r"""The evidence pack: every evidence item appended to one file, ``evidence.pack``.

A live session (``toolproof serve --record``, an agent's ``record_session``) stores
its evidence bytes in ``evidence.pack`` in its live directory, and a run stores them
in ``evidence.pack`` beside its sorted index ``evidence.idx``
(:mod:`toolproof.bundle.packindex`; read through :mod:`toolproof.bundle.evidence`),
instead of one file per item: creating a file costs far more than appending to one
(on ext4 under load, hundreds of microseconds per create, contending with group
commit's ``syncfs``), and a million files in one folder is no layout at all.

The file is::

    toolproof-evidence-pack 1\n            the header line (written when it is created)
    <64 hex> <size>\n<size bytes>           one item: its SHA-256, its size, its bytes
    <64 hex> <size>\n<size bytes>           ...

An item is appended in one ``write(2)`` (its line and its bytes, with ``writev``)
before the trace event that registers it, so a killed process leaves every item a
written event names whole. :func:`read_pack` (a live session's pack) and
:func:`scan_pack` (a run's, streamed in bounded memory) never trust the file: they
read items in order and check each one's digest; :func:`read_pack` stops at the
first item that is torn (the file ends inside its line or its bytes) or damaged, the
way a torn trace line ends the sound part of a trace, and :func:`scan_pack` refuses
it in one line naming the file, the byte offset and the rule.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolproof.contract.layout import EVIDENCE_PACK_FILE
from toolproof.errors import VerificationError

__all__ = [
    "PACK_FILE",
    "PACK_HEADER",
    "PackContents",
    "PackItem",
    "PackWriter",
    "item_line",
    "read_pack",
    "scan_pack",
]

PACK_FILE = EVIDENCE_PACK_FILE
"""The file holding the evidence bytes of a live session or a run."""
PACK_HEADER = b"toolproof-evidence-pack 1\n"
"""The first line of every pack: the format and its version."""
_ITEM_LINE = re.compile(rb"([0-9a-f]{64}) (0|[1-9][0-9]{0,19})\n")
_LONGEST_LINE = 64 + 1 + 20 + 1
_BLOCK = 1 << 20
"""Bytes of an item hashed per read when a pack is streamed (1 MiB)."""


def item_line(hex_digest: str, size: int) -> bytes:
    """The line that starts an item: ``<64 hex> <size>`` and a line feed (ASCII)."""
    return b"%s %d\n" % (hex_digest.encode("ascii"), size)


class PackWriter:
    """Appends evidence items to a new pack file (see the module docstring).

    Args:
        path: the pack to create (it must not exist); its header line is written now.
        existing: append to the pack at ``path`` instead (it must exist: a copy of a
            live session's sound items, see :meth:`PackContents.copy_sound`).

    Raises:
        OSError: the file cannot be created or its header written (nothing is left),
            or, ``existing``, it cannot be opened.

    """

    def __init__(self, path: Path, *, existing: bool = False) -> None:
        self.path = Path(path)
        self._where = str(self.path)
        create = 0 if existing else os.O_CREAT | os.O_EXCL
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | create, 0o666)
        self._size = os.fstat(self._fd).st_size if existing else 0
        self._dirty = True
        self._synced_once = False
        self._syncing = threading.Lock()  # one sync at a time: a second waits, then sees clean
        self.broken: OSError | None = None
        """The write error that broke the writer (its item could not be cut off), or None."""
        if existing:
            return
        try:
            self._write((PACK_HEADER,), 0, len(PACK_HEADER))
        except OSError:
            os.close(self._fd)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise

    def cut(self, size: int) -> None:
        """Cut the pack back to its first ``size`` bytes (items after them are dropped).

        Raises:
            OSError: the truncation failed (it names the pack).

        """
        try:
            os.ftruncate(self._fd, size)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._where) from exc
        self._size = size
        self._dirty = True

    @property
    def size(self) -> int:
        """Bytes written so far (header line and items)."""
        return self._size

    def append(self, hex_digest: str, data: bytes) -> int:
        """Append one item (its line and bytes in one ``writev``); return its bytes' offset.

        Args:
            hex_digest: the 64 lowercase hex digits of ``data``'s SHA-256 (not checked
                here: the caller computed it from ``data``).
            data: the evidence bytes.

        Returns:
            The offset of the item's first byte in the file.

        Raises:
            OSError: the write failed (it names the pack). What was written of the item
                is cut off again; if even that fails the writer is broken and every
                later append raises the same error.

        """
        if self.broken is not None:
            raise self.broken
        size = len(data)
        line = item_line(hex_digest, size)
        before = self._size
        self._write((line, data), before, before + len(line) + size)
        return before + len(line)

    def _write(self, parts: Sequence[bytes], before: int, after: int) -> None:
        """Write ``parts`` at the end (``before``), ending at ``after``; cut off on failure.

        One ``writev`` (one ``write(2)`` unless it is partial, then the rest by ``write``).

        Raises:
            OSError: the write failed, naming the pack; the file is cut back to
                ``before`` (if even that fails, the writer is marked broken).

        """
        try:
            written = os.writev(self._fd, parts)  # one write(2) unless partial
            if written < after - before:  # partial (a signal, a filling disk): the rest in order
                rest = memoryview(b"".join(parts))[written:]
                while rest:
                    rest = rest[os.write(self._fd, rest) :]
            self._size = after
            self._dirty = True
        except OSError as exc:
            error = OSError(exc.errno, exc.strerror, self._where)
            try:
                os.ftruncate(self._fd, before)
            except OSError:
                self.broken = error
            self._size = before
            raise error from exc

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` (``pread``).

        Raises:
            OSError: the read failed, or the file is shorter than that (it was cut).

        """
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise OSError(0, f"{len(data)} of {size} bytes at offset {offset}", self._where)
        return data

    def sync(self) -> None:
        """Make every item appended so far durable (``fsync``; the first also fsyncs the folder).

        Does nothing when nothing was appended since the last sync; safe to call from
        a sync thread while another thread appends.

        Raises:
            OSError: the fsync failed (it names the pack).

        """
        with self._syncing:
            if not self._dirty or self._fd < 0:
                return
            self._dirty = False  # before the fsync: an append during it is synced next time
            try:
                os.fsync(self._fd)
                if not self._synced_once:  # the pack's own name in its folder
                    fd = os.open(self.path.parent, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    self._synced_once = True
            except OSError as exc:
                self._dirty = True
                raise OSError(exc.errno, exc.strerror, self._where) from exc

    def close(self, *, sync: bool = True) -> None:
        """Sync (unless ``sync`` is False) and close the file; later reads open it by path.

        Raises:
            OSError: the fsync failed (the file is closed anyway).

        """
        if self._fd < 0:
            return
        try:
            if sync:
                self.sync()
        finally:
            os.close(self._fd)
            self._fd = -1

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fd < 0


@dataclass(frozen=True)
class PackContents:
    """The sound part of a pack as read by :func:`read_pack`.

    Attributes:
        path: the pack file.
        items: hex digest -> ``(offset, size)`` of each whole item whose bytes match its
            digest, in file order (a digest appended twice keeps its first item).
        end: bytes of the sound part (header line and whole items).
        size: bytes of the file.
        problem: why reading stopped before ``size`` (``None``: the file is sound to
            its end); it names the item (from 1) and its byte offset.

    """

    path: Path
    items: dict[str, tuple[int, int]]
    end: int
    size: int
    problem: str | None = None
    _data: bytes = field(default=b"", repr=False)

    def copy_sound(self, target: Path) -> list[tuple[str, int, int]]:
        """Write the sound part (header line and whole items) to the new file ``target``.

        Returns:
            Each item copied, in file order: its hex digest, its bytes' offset, its size.

        Raises:
            OSError: ``target`` exists or cannot be written.

        """
        with Path(target).open("xb") as file:
            file.write(memoryview(self._data)[: self.end])
        return [(name, offset, size) for name, (offset, size) in self.items.items()]

    def read(self, hex_digest: str) -> bytes:
        """The bytes of the item of ``hex_digest`` (checked against it when the pack was read).

        Raises:
            KeyError: no sound item has that digest.

        """
        offset, size = self.items[hex_digest]
        return self._data[offset : offset + size]


def read_pack(path: Path) -> PackContents:
    """Read a pack file, check every item's digest, stop at the first torn or damaged one.

    Args:
        path: the ``evidence.pack`` of a live session.

    Returns:
        The :class:`PackContents`; its ``problem`` says what ended the sound part early.

    Raises:
        OSError: the file cannot be read.

    """
    data = Path(path).read_bytes()
    items: dict[str, tuple[int, int]] = {}
    problem: str | None = None
    if not data.startswith(PACK_HEADER):
        problem = f"does not start with its header line {PACK_HEADER[:-1].decode()!r}"
        return PackContents(Path(path), items, 0, len(data), problem, data)
    at = len(PACK_HEADER)
    number = 0
    while at < len(data):
        number += 1
        line = _ITEM_LINE.match(data, at, min(len(data), at + _LONGEST_LINE))
        if line is None:
            if b"\n" in data[at : at + _LONGEST_LINE] or len(data) - at >= _LONGEST_LINE:
                why = "its line is not '<sha256 hex> <size>'"
            else:
                why = "torn: the file ends inside its line"
            problem = f"item {number} at byte {at}: {why}"
            break
        hex_digest, size = line.group(1).decode("ascii"), int(line.group(2))
        start = line.end()
        if start + size > len(data):
            problem = (
                f"item {number} at byte {at} (evidence {hex_digest}): torn: "
                f"{len(data) - start} of its {size} bytes"
            )
            break
        if hashlib.sha256(memoryview(data)[start : start + size]).hexdigest() != hex_digest:
            problem = f"item {number} at byte {at}: its bytes do not match its digest {hex_digest}"
            break
        items.setdefault(hex_digest, (start, size))
        at = start + size
    return PackContents(Path(path), items, at, len(data), problem, data)


@dataclass(frozen=True)
class PackItem:
    """One item of a pack as :func:`scan_pack` reads it (its bytes' digest checked).

    Attributes:
        name: the SHA-256 hex of its bytes (from its line, checked).
        offset: the byte offset of its first byte.
        size: its size in bytes.

    """

    name: str
    offset: int
    size: int


def scan_pack(path: Path) -> Iterator[PackItem]:
    """Every item of a run's pack in file order, each digest checked, in bounded memory.

    The file is read once, front to back, in blocks (an item of any size is hashed 1 MiB
    at a time); nothing is kept but the item being read.

    Args:
        path: the pack file.

    Raises:
        VerificationError: the pack is not sound, in one line naming ``evidence.pack``,
            the byte offset and the rule: its header line is not the pack's, an item's
            line is not ``<sha256 hex> <size>``, the file ends inside an item (torn), or
            an item's bytes do not hash to its digest. ``file`` is ``evidence.pack``.
        OSError: the file cannot be read.

    """
    with Path(path).open("rb", buffering=_BLOCK) as file:
        header = file.read(len(PACK_HEADER))
        if header != PACK_HEADER:
            raise VerificationError(
                f"{PACK_FILE} at byte 0: does not start with its header line "
                f"{PACK_HEADER[:-1].decode()!r}",
                file=PACK_FILE,
            )
        at, number = len(PACK_HEADER), 0
        while line := file.readline(_LONGEST_LINE):
            number += 1
            matched = _ITEM_LINE.fullmatch(line)
            if matched is None:
                why = "is not '<sha256 hex> <size>'"
                if not line.endswith(b"\n") and len(line) < _LONGEST_LINE:
                    why = "is torn: the file ends inside it"
                raise VerificationError(
                    f"{PACK_FILE} at byte {at}: item {number}'s line {why}", file=PACK_FILE
                )
            name, size = matched.group(1).decode("ascii"), int(matched.group(2))
            offset, sha, left = at + len(line), hashlib.sha256(), size
            while left:
                block = file.read(min(left, _BLOCK))
                if not block:
                    raise VerificationError(
                        f"{PACK_FILE} at byte {at}: item {number} ({name}) is torn: the file "
                        f"ends after {size - left} of its {size} bytes",
                        file=PACK_FILE,
                    )
                sha.update(block)
                left -= len(block)
            if sha.hexdigest() != name:
                raise VerificationError(
                    f"{PACK_FILE} at byte {at}: item {number}'s bytes do not hash to its "
                    f"digest {name}",
                    file=PACK_FILE,
                )
            yield PackItem(name, offset, size)
            at = offset + size
