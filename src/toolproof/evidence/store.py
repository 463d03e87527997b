"""The evidence store of a run: exact bytes in ``evidence.pack``, and spans within them.

Bytes are stored once per digest, appended to the directory's ``evidence.pack``
(:mod:`toolproof.bundle.pack`: one ``write(2)`` per item, no file created per item),
and never re-encoded: a :class:`SupportRef` is an interval *within that item*, so a
chunk cut from the middle of a document is cited by offsets from the chunk's first
byte, never from the document's (nor from the pack's).

A run's store writes the pack's sorted index ``evidence.idx``
(:mod:`toolproof.bundle.packindex`) when it is closed: the run's evidence layout
(docs/runs.md). A live session's store (``live=True``) writes no index: finalizing
the session writes the run's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolproof.bundle.pack import PACK_FILE, PACK_HEADER, PackWriter, item_line
from toolproof.bundle.packindex import write_index
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import SupportRef
from toolproof.contract.layout import EVIDENCE_INDEX_FILE, evidence_path
from toolproof.errors import InputError
from toolproof.identity import digest, digest_of_hex

__all__ = ["EvidenceStore", "span_ref"]


def span_ref(evidence_id: str, data: bytes, start: int, end: int) -> SupportRef:
    """The :class:`SupportRef` of ``data[start:end]``, where ``data`` is the evidence's bytes.

    Raises:
        InputError: the interval is empty or outside ``[0, len(data)]``.

    """
    if not 0 <= start < end <= len(data):
        raise InputError(
            f"support interval [{start}, {end}) is not a non-empty interval within "
            f"{evidence_id} ({len(data)} bytes)",
            evidence=evidence_id,
            start=start,
            end=end,
        )
    snippet = digest(data[start:end])
    return SupportRef(evidence=evidence_id, start=start, end=end, sha256=snippet)


class EvidenceStore:
    """Stores evidence bytes in a run directory's (or a live session's) ``evidence.pack``.

    Args:
        run_dir: the run directory being written, or the live session directory.
        live: a live session's store: no index is written when it is closed.
        adopt: the items of a pack already at ``run_dir/evidence.pack`` (a finalized
            session's live pack, copied: ``(hex, offset, size)`` each, in file order).
            Items stored in that order are taken as they lie, not written again; the
            first that differs (or :meth:`close`) cuts the pack after the items taken,
            so the pack's bytes are those a store without ``adopt`` would write.

    Attributes:
        pack: the pack writer.

    Raises:
        OSError: the pack cannot be created (it must not exist).

    """

    def __init__(
        self, run_dir: Path, *, live: bool = False, adopt: Sequence[tuple[str, int, int]] = ()
    ) -> None:
        self.run_dir = Path(run_dir)
        self.live = live
        self.pack = PackWriter(self.run_dir / PACK_FILE, existing=bool(adopt))
        self._adopt = list(adopt)
        self._taken = 0
        """Adopted items taken so far; the pack's bytes after them are not yet the run's."""
        self._taken_end = len(PACK_HEADER)
        self._sizes: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        self._total = 0
        self._index: tuple[int, str] | None = None

    @property
    def total_bytes(self) -> int:
        """Bytes of distinct evidence stored so far (a running count: O(1))."""
        return self._total

    @property
    def stored_bytes(self) -> int:
        """Bytes the store wrote to disk so far: the pack's, item lines included."""
        return self.pack.size

    def sync(self) -> None:
        """Make the pack's items durable (``fsync``; nothing when nothing was appended).

        Raises:
            OSError: the fsync failed (it names the pack).

        """
        self.pack.sync()

    def close(self, *, sync: bool = True) -> None:
        """Close the pack (fsynced unless ``sync`` is False) and write a run's index.

        Reads after it open the pack by path. A run's ``evidence.idx`` is written once,
        from the offsets and sizes kept while appending (its durability is the run
        directory writer's, as every file of the run).

        Raises:
            OSError: the fsync or the index's write failed (the pack is closed anyway).

        """
        self._stop_adopting()
        self.pack.close(sync=sync)
        if not self.live and self._index is None:
            entries = (
                (key.removeprefix("evidence_"), offset, self._sizes[key])
                for key, offset in self._offsets.items()
            )
            self._index = write_index(self.run_dir / EVIDENCE_INDEX_FILE, entries)

    def _stop_adopting(self) -> None:
        """Cut the adopted pack after the items taken (nothing after them is the run's).

        Raises:
            OSError: the truncation failed.

        """
        if self._adopt:
            self._adopt = []
            if self.pack.size != self._taken_end:
                self.pack.cut(self._taken_end)

    def __contains__(self, evidence_id: object) -> bool:
        return evidence_id in self._sizes

    def put(
        self,
        data: bytes,
        *,
        media_type: str,
        kind: str,
        step: str,
        call: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store ``data`` exactly (once per digest) and return its evidence record.

        The pack is not fsynced per item: the run directory writer makes the whole
        directory durable before it renames it into place (a live session: :meth:`sync`).

        Args:
            data: the evidence bytes, as they will be cited.
            media_type: e.g. ``application/json`` or ``text/plain; charset=utf-8``.
            kind: the source kind (``tool_result``, ``model_request``...).
            step: the plan step the bytes came from.
            call: the call id they came from, if any.
            detail: source-specific plain JSON.

        Returns:
            The record as plain JSON, the :class:`~toolproof.contract.evidence.EvidenceRecord`
            fields (``EvidenceRecord.model_validate(record)`` is the model): id, digest
            and path (the item's name ``evidence/<hex>``) computed from the bytes here.

        Raises:
            OSError: the pack cannot be written (nothing is left of the item).

        """
        hex_digest = self._store(data)
        source = {
            "schema_version": SCHEMA_VERSION,
            "kind": kind,
            "step": step,
            "call": call,
            "detail": dict(detail or {}),
        }
        return {
            "schema_version": SCHEMA_VERSION,
            "id": "evidence_" + hex_digest,  # as contract.evidence.evidence_id_for
            "digest": digest_of_hex(hex_digest),
            "size": len(data),
            "media_type": media_type,
            "path": evidence_path(hex_digest),
            "source": source,
        }

    def stored_files(self) -> dict[str, tuple[int, str]]:
        """Size and ``sha256:`` digest of the files the store wrote whose digest it knows.

        A closed run's store knows its index's; the pack is hashed by whoever lists it
        (the manifest reads what is there, so bytes rewritten after they were stored are
        seen). Empty for a live session or before :meth:`close`.
        """
        if self._index is None:
            return {}
        return {EVIDENCE_INDEX_FILE: self._index}

    def _store(self, data: bytes) -> str:
        """Store ``data`` once per digest; return the hex of its SHA-256."""
        hex_digest = hashlib.sha256(data).hexdigest()
        evidence_id = "evidence_" + hex_digest
        if evidence_id in self._sizes:
            return hex_digest
        if self._taken < len(self._adopt):
            name, offset, size = self._adopt[self._taken]
            line = len(item_line(name, size))
            if name == hex_digest and offset - line == self._taken_end:  # as a write would lie
                self._taken += 1
                self._taken_end = offset + size
                self._offsets[evidence_id] = offset
                self._sizes[evidence_id] = size
                self._total += size
                return hex_digest
            self._stop_adopting()
        self._offsets[evidence_id] = self.pack.append(hex_digest, data)
        self._sizes[evidence_id] = len(data)
        self._total += len(data)
        return hex_digest

    def size_of(self, evidence_id: str) -> int:
        """The size in bytes of stored evidence.

        Raises:
            InputError: no such evidence in this run.

        """
        try:
            return self._sizes[evidence_id]
        except KeyError:
            raise InputError(
                f"no evidence {evidence_id} in this run", evidence=evidence_id
            ) from None

    def read(self, evidence_id: str) -> bytes:
        """The exact bytes of stored evidence (read from the pack).

        Raises:
            InputError: no such evidence in this run.

        """
        return self._from_pack(evidence_id, 0, self.size_of(evidence_id))

    def _from_pack(self, evidence_id: str, start: int, length: int) -> bytes:
        offset = self._offsets[evidence_id] + start
        if not self.pack.closed:
            return self.pack.read(offset, length)
        with self.pack.path.open("rb") as file:
            file.seek(offset)
            return file.read(length)

    def support(self, evidence_id: str, start: int, end: int) -> SupportRef:
        """The :class:`SupportRef` of bytes ``[start, end)`` of an evidence item.

        Offsets count from the first byte of *this item* (never from the pack's).

        Raises:
            InputError: unknown evidence, or an empty or out-of-bounds interval.

        """
        size = self.size_of(evidence_id)
        if not 0 <= start < end <= size:
            raise InputError(
                f"support interval [{start}, {end}) is not a non-empty interval within "
                f"{evidence_id} ({size} bytes)",
                evidence=evidence_id,
                start=start,
                end=end,
            )
        data = self._from_pack(evidence_id, start, end - start)
        return span_ref(evidence_id, data, 0, len(data)).model_copy(
            update={"start": start, "end": end}
        )

    def find(self, evidence_id: str, needle: bytes, *, start: int = 0) -> SupportRef | None:
        """The support of the first occurrence of ``needle`` at or after ``start``, or ``None``.

        Raises:
            InputError: unknown evidence.

        """
        if not needle:
            return None
        data = self.read(evidence_id)
        at = data.find(needle, start)
        if at < 0:
            return None
        return span_ref(evidence_id, data, at, at + len(needle))
