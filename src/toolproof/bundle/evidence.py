"""The evidence of a run directory, read through one seam whatever its layout.

Every reader of a committed run's evidence bytes (verify's checks, replay, ``show``,
the timeline, the session cassettes, the test kit, ``serve-api``) opens it with
:meth:`RunEvidence.open` and names an item by the SHA-256 hex of its bytes (an
evidence id ``evidence_<hex>`` is accepted too); no other module knows where the
bytes lie. The layouts (docs/runs.md, "The run directory"):

* **pack** (:data:`LAYOUT_PACK`, every run written since issue 31):
  ``evidence.pack`` holds every item, one after the other
  (:mod:`toolproof.bundle.pack`), and ``evidence.idx`` their sorted index
  (:mod:`toolproof.bundle.packindex`); the header line of each names its format and
  version. One item is found by binary search over the index, never by loading it.
* **files** (:data:`LAYOUT_FILES`, runs written before): one file per item,
  ``evidence/<sha256 hex>``.

A run holding ``evidence.pack`` or ``evidence.idx`` is in the pack layout; any other
in the files layout. Offsets given to :meth:`RunEvidence.read` count from the item's
first byte in every layout (never from the pack's): a
:class:`~toolproof.contract.evidence.SupportRef` keeps naming the exact bytes it was
recorded against. A damaged pack or index is refused with a
:class:`~toolproof.errors.VerificationError` whose one-line message names the file,
the byte offset and the rule.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from toolproof.bundle.manifest import hash_file
from toolproof.bundle.pack import item_line, scan_pack
from toolproof.bundle.packindex import PackIndex
from toolproof.contract.layout import (
    EVIDENCE_DIR,
    EVIDENCE_INDEX_FILE,
    EVIDENCE_PACK_FILE,
    evidence_path,
)
from toolproof.errors import VerificationError
from toolproof.identity import digest_of_hex

__all__ = ["LAYOUT_FILES", "LAYOUT_PACK", "EvidenceItem", "RunEvidence"]

LAYOUT_FILES = 1
"""The layout of one file per item, ``evidence/<sha256 hex>`` (runs written before the pack)."""
LAYOUT_PACK = 2
"""The layout of ``evidence.pack`` and its index ``evidence.idx``."""

_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class EvidenceItem:
    """One stored item as :meth:`RunEvidence.items` reads it.

    Attributes:
        name: its name: the SHA-256 hex of its bytes in a sound run (a stray file of
            the files layout may be named anything).
        path: its run-relative name for messages, ``evidence/<name>``.
        size: its size in bytes.
        digest: ``sha256:<hex>`` of its bytes as stored (hashed now, or the digest the
            manifest check already verified).

    """

    name: str
    path: str
    size: int
    digest: str


def _name(key: str) -> str:
    """The item name of an evidence id (``evidence_<hex>``) or of a hex digest."""
    return key.removeprefix("evidence_")


class RunEvidence:
    """The evidence items of one run directory (see the module docstring).

    Open it with :meth:`open`. Reads do not cache bytes; memory stays bounded by the
    item read (a files-layout run lists its folder only when :meth:`names` is asked).

    Attributes:
        directory: the run directory.
        layout: :data:`LAYOUT_PACK` or :data:`LAYOUT_FILES`.

    """

    def __init__(
        self,
        directory: Path,
        layout: int,
        digests: Mapping[str, str],
        sizes: Mapping[str, int],
    ) -> None:
        self.directory = Path(directory)
        self.layout = layout
        self._digests = digests
        self._sizes = sizes
        self._known: dict[str, tuple[int, str]] = {}
        self._folder = self.directory / EVIDENCE_DIR
        self._pack = self.directory / EVIDENCE_PACK_FILE
        self._index: PackIndex | None = None
        self._checked = False  # every packed item's digest checked (items() ran to its end)
        """A packed run's item sizes by name, once :meth:`items` checked them all."""

    @classmethod
    def open(
        cls,
        directory: Path,
        digests: Mapping[str, str] | None = None,
        sizes: Mapping[str, int] | None = None,
    ) -> RunEvidence:
        """The evidence of the run directory ``directory``, in whatever layout it has.

        Args:
            directory: a committed run directory (or one being written).
            digests: ``sha256:`` digests already verified (by the manifest check), by
                run-relative path: an item whose file is listed is not hashed again.
            sizes: the sizes that go with them (read from the files when not given).

        Returns:
            The reader; opening reads nothing but the directory's entries.

        """
        directory = Path(directory)
        packed = any(
            (directory / name).exists() for name in (EVIDENCE_PACK_FILE, EVIDENCE_INDEX_FILE)
        )
        layout = LAYOUT_PACK if packed else LAYOUT_FILES
        return cls(directory, layout, digests or {}, sizes or {})

    @staticmethod
    def path_of(key: str) -> str:
        """The run-relative name of an item for messages: ``evidence/<hex>``.

        Args:
            key: the item's hex digest or evidence id.

        """
        return evidence_path(_name(key))

    @staticmethod
    def key_of_path(path: str) -> str | None:
        """The hex digest an item's name ``evidence/<hex>`` names, or ``None`` for another path."""
        hex_digest = path.removeprefix(EVIDENCE_DIR + "/")
        return hex_digest if hex_digest != path and _HEX.fullmatch(hex_digest) else None

    def _file(self, key: str) -> Path:
        return self._folder / _name(key)

    def _open_index(self) -> PackIndex:
        """The pack's index (opened once).

        Raises:
            VerificationError: the pack or the index is missing, or the index's header
                or length is wrong.

        """
        if self._index is None:
            for name in (EVIDENCE_PACK_FILE, EVIDENCE_INDEX_FILE):
                path = self.directory / name
                if path.is_symlink() or not path.is_file():
                    raise VerificationError(
                        f"{name} is missing: a run's evidence is {EVIDENCE_PACK_FILE} read "
                        f"through {EVIDENCE_INDEX_FILE}, and it has one without the other",
                        file=name,
                    )
            self._index = PackIndex(self.directory / EVIDENCE_INDEX_FILE, self._pack.stat().st_size)
        return self._index

    def _find(self, key: str) -> tuple[int, int] | None:
        name = _name(key)
        if not _HEX.fullmatch(name):
            return None
        return self._open_index().find(name)

    def __contains__(self, key: object) -> bool:
        """Whether an item of that hex digest (or evidence id) is stored.

        Raises:
            VerificationError: the pack's index is damaged where the search read it.

        """
        if not isinstance(key, str) or not key or "/" in key or key in (".", ".."):
            return False
        if self.layout == LAYOUT_PACK:
            return self._find(key) is not None
        path = self._file(key)
        return path.is_file() and not path.is_symlink()

    def names(self) -> list[str]:
        """The name of every stored item, sorted (a stray file's name included).

        Only regular files count in the files layout: a symlink is refused by the
        manifest check.

        Raises:
            VerificationError: the pack's index is damaged.

        """
        if self.layout == LAYOUT_PACK:
            return [name for name, _, _ in self._open_index().walk()]
        if not self._folder.is_dir():
            return []
        with os.scandir(self._folder) as entries:  # the directory's own types: no stat per file
            return sorted(entry.name for entry in entries if entry.is_file(follow_symlinks=False))

    def each_name(self) -> Iterator[str]:
        """The name of every stored item, sorted, one at a time (as :meth:`names`).

        The pack layout walks ``evidence.idx`` front to back, holding one block of it;
        the files layout lists the folder.

        Raises:
            VerificationError: the pack's index is damaged.

        """
        if self.layout == LAYOUT_PACK:
            yield from (name for name, _, _ in self._open_index().walk())
            return
        yield from self.names()

    def stored_files(self) -> Iterator[str]:
        """The run-relative paths of the files that hold the items, in name order."""
        if self.layout == LAYOUT_PACK:
            yield from (EVIDENCE_INDEX_FILE, EVIDENCE_PACK_FILE)
            return
        for name in self.names():
            yield evidence_path(name)

    def size(self, key: str) -> int:
        """The size in bytes of the item.

        Raises:
            KeyError: no such item.
            VerificationError: the pack's index is damaged.
            OSError: it cannot be read.

        """
        if self.layout == LAYOUT_PACK:
            found = self._find(key)
            if found is None:
                raise KeyError(key)
            return found[1]
        if key not in self:
            raise KeyError(key)
        size = self._sizes.get(self.path_of(key))
        return size if size is not None else self._file(key).stat().st_size

    def size_and_digest(self, key: str) -> tuple[int, str]:
        """Size in bytes and ``sha256:<hex>`` of the item's bytes as stored; hashed at most once.

        Raises:
            KeyError: no such item.
            VerificationError: the pack or its index is damaged (a packed item is read
                whole, so its digest is checked).
            OSError: it cannot be read.

        """
        if self.layout == LAYOUT_PACK:
            name = _name(key)
            found = self._find(key) if self._checked else None
            size = found[1] if found is not None else None
            if size is None:  # not seen by a whole pass: read it, its digest checked
                size = len(self.read(key))
            return size, digest_of_hex(name)
        rel = self.path_of(key)
        verified, size = self._digests.get(rel), self._sizes.get(rel)
        if verified is not None and size is not None:
            # the manifest check found a regular file of this size with this digest: no
            # stat again, and nothing cached (a verify of N items would cost N of each)
            return size, verified
        known = self._known.get(rel)
        if known is not None:
            return known
        if key not in self:
            raise KeyError(key)
        known = (self.size(key), verified) if verified is not None else hash_file(self._file(key))
        self._known[rel] = known
        return known

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of the item (``end`` None: to its end; fewer when shorter).

        In the pack layout the item's ``<hex> <size>`` line is checked before its
        bytes are read, and a whole item (``start`` 0, ``end`` None or past its end)
        is checked against its digest.

        Args:
            key: the item's hex digest or evidence id.
            start: the first byte, counted from the item's first byte (>= 0).
            end: one past the last byte, or None.

        Raises:
            KeyError: no such item.
            VerificationError: the index does not point at the item's line, or its bytes
                do not hash to its digest (one line: file, byte offset, rule).
            OSError: it cannot be read.

        """
        if self.layout == LAYOUT_PACK:
            return self._read_packed(key, start, end)
        if key not in self:
            raise KeyError(key)
        with self._file(key).open("rb") as file:
            if start:
                file.seek(start)
            return file.read() if end is None else file.read(max(0, end - start))

    def _read_packed(self, key: str, start: int, end: int | None) -> bytes:
        found = self._find(key)
        if found is None:
            raise KeyError(key)
        offset, size = found
        name = _name(key)
        line = item_line(name, size)
        at = offset - len(line)
        stop = size if end is None else max(start, min(end, size))
        whole = start <= 0 and stop == size
        with self._pack.open("rb", buffering=0) as file:
            if at < 0 or os.pread(file.fileno(), len(line), at) != line:
                raise VerificationError(
                    f"{EVIDENCE_PACK_FILE} at byte {max(at, 0)}: {EVIDENCE_INDEX_FILE} points "
                    f"at offset {offset} for {name}, which is not the start of that item's "
                    f"bytes (no line '{name} {size}' before it)",
                    file=EVIDENCE_PACK_FILE,
                )
            data = os.pread(file.fileno(), stop - start, offset + start) if stop > start else b""
        if whole and hashlib.sha256(data).hexdigest() != name:
            raise VerificationError(
                f"{EVIDENCE_PACK_FILE} at byte {at}: the bytes of item {name} do not hash "
                "to its digest",
                file=EVIDENCE_PACK_FILE,
            )
        return data

    def items(self) -> Iterator[EvidenceItem]:
        """Every stored item with its size and digest, in storage order, all checked.

        The pack layout streams ``evidence.pack`` once, front to back, hashing every
        item, then walks ``evidence.idx`` once checking that its records are exactly
        those items; memory holds 48 bytes per item (offset, size, digest) until then.
        Once the iterator is exhausted, :meth:`size_and_digest` answers from the index
        without reading an item again. The files layout yields the files by name. Exhaust the
        iterator: the index is checked after the last item.

        Raises:
            VerificationError: the pack or the index is not sound (one line: file, byte
                offset, rule), or a packed run also holds an ``evidence/`` folder.
            OSError: a file cannot be read.

        """
        if self.layout == LAYOUT_PACK:
            yield from self._packed_items()
            return
        for name in self.names():
            rel = evidence_path(name)
            known = self._known.get(rel)
            verified, size = self._digests.get(rel), self._sizes.get(rel)
            if known is None and verified is not None:  # the manifest check's: not hashed again
                known = (size if size is not None else self.size(name), verified)
            size, file_digest = known or hash_file(self._file(name))
            yield EvidenceItem(name, rel, size, file_digest)

    def _packed_items(self) -> Iterator[EvidenceItem]:
        index = self._open_index()
        if self._folder.exists():
            raise VerificationError(
                f"{EVIDENCE_DIR}/ is in a run whose evidence is {EVIDENCE_PACK_FILE}: "
                "one run has one evidence layout",
                file=EVIDENCE_DIR,
            )
        offsets, sizes, digests = array("Q"), array("Q"), bytearray()
        for item in scan_pack(self._pack):
            offsets.append(item.offset)
            sizes.append(item.size)
            digests += bytes.fromhex(item.name)
            yield EvidenceItem(
                item.name, evidence_path(item.name), item.size, digest_of_hex(item.name)
            )
        index.check(offsets, sizes, digests)
        self._checked = True  # every item's digest checked: sizes from the index, not read again
