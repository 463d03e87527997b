"""The evidence of a run directory, read through one seam whatever its layout.

Every reader of a committed run's evidence bytes (verify's checks, replay, ``show``,
the timeline, the session cassettes, the test kit) opens it with
:meth:`RunEvidence.open` and names an item by the SHA-256 hex of its bytes (an
evidence id ``evidence_<hex>`` is accepted too); no other module knows where the
bytes lie. The layouts:

* **files** (:data:`LAYOUT_FILES`): one file per item, ``evidence/<sha256 hex>``.

Offsets given to :meth:`RunEvidence.read` count from the item's first byte, in every
layout: a :class:`~toolproof.contract.evidence.SupportRef` keeps naming the exact
bytes it was recorded against.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from toolproof.bundle.manifest import hash_file
from toolproof.contract.layout import EVIDENCE_DIR, evidence_path

__all__ = ["LAYOUT_FILES", "EvidenceItem", "RunEvidence"]

LAYOUT_FILES = 1
"""The layout of one file per item, ``evidence/<sha256 hex>``."""


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
        layout: :data:`LAYOUT_FILES`.

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
        return cls(Path(directory), LAYOUT_FILES, digests or {}, sizes or {})

    @staticmethod
    def path_of(key: str) -> str:
        """The run-relative name of an item for messages: ``evidence/<hex>``.

        Args:
            key: the item's hex digest or evidence id.

        """
        return evidence_path(_name(key))

    def _file(self, key: str) -> Path:
        return self._folder / _name(key)

    def __contains__(self, key: object) -> bool:
        """Whether an item of that hex digest (or evidence id) is stored, as a regular file."""
        if not isinstance(key, str) or not key or "/" in key or key in (".", ".."):
            return False
        path = self._file(key)
        return path.is_file() and not path.is_symlink()

    def names(self) -> list[str]:
        """The name of every stored item, sorted (a stray file's name included).

        Only regular files count: a symlink is refused by the manifest check.
        """
        if not self._folder.is_dir():
            return []
        with os.scandir(self._folder) as entries:  # the directory's own types: no stat per file
            return sorted(entry.name for entry in entries if entry.is_file(follow_symlinks=False))

    def stored_files(self) -> Iterator[str]:
        """The run-relative paths of the files that hold the items, in name order."""
        for name in self.names():
            yield evidence_path(name)

    def size(self, key: str) -> int:
        """The size in bytes of the item.

        Raises:
            KeyError: no such item.
            OSError: it cannot be read.

        """
        if key not in self:
            raise KeyError(key)
        size = self._sizes.get(self.path_of(key))
        return size if size is not None else self._file(key).stat().st_size

    def size_and_digest(self, key: str) -> tuple[int, str]:
        """Size in bytes and ``sha256:<hex>`` of the item's bytes as stored; hashed at most once.

        Raises:
            KeyError: no such item.
            OSError: it cannot be read.

        """
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

        Args:
            key: the item's hex digest or evidence id.
            start: the first byte, counted from the item's first byte (>= 0).
            end: one past the last byte, or None.

        Raises:
            KeyError: no such item.
            OSError: it cannot be read.

        """
        if key not in self:
            raise KeyError(key)
        with self._file(key).open("rb") as file:
            if start:
                file.seek(start)
            return file.read() if end is None else file.read(max(0, end - start))

    def items(self) -> Iterator[EvidenceItem]:
        """Every stored item with its size and digest, in storage order (by name here).

        Raises:
            OSError: an item cannot be read.

        """
        for name in self.names():
            rel = evidence_path(name)
            known = self._known.get(rel)
            if known is None and rel in self._digests:
                known = (self.size(name), self._digests[rel])
            size, file_digest = known or hash_file(self._file(name))
            yield EvidenceItem(name, rel, size, file_digest)
