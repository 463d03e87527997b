"""The evidence store of a run: exact bytes under ``evidence/``, and spans within them.

Bytes are stored once per digest as ``evidence/<sha256 hex>`` and never re-encoded:
a :class:`SupportRef` is an interval *within that file*, so a chunk cut from the
middle of a document is cited by offsets from the chunk's first byte, never from
the document's.

A live session's store (``pack=True``) appends each new item to the session's
``evidence.pack`` instead (:mod:`toolproof.evidence.pack`: one ``write(2)`` per item,
no file created) and serves every read from it; offsets within an item are the same
as within its file, and finalizing the session writes the run's ``evidence/`` files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import SupportRef, evidence_path_for
from toolproof.contract.layout import EVIDENCE_DIR
from toolproof.errors import InputError
from toolproof.evidence.pack import PACK_FILE, PackWriter
from toolproof.identity import digest, digest_of_hex

__all__ = ["EvidenceStore", "span_ref"]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
"""How an evidence file is opened: created now, never an existing one."""


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
    """Stores evidence bytes under a run directory's ``evidence/`` folder, or in a pack.

    Args:
        run_dir: the run directory being written (``evidence/`` is created if missing),
            or the live session directory when ``pack`` is True.
        pack: append every new item to ``run_dir/evidence.pack`` (created now; it must
            not exist) instead of a file per item; ``evidence/`` is not created.

    Attributes:
        pack: the pack writer, or ``None`` for a file per item.

    Raises:
        OSError: the folder or the pack cannot be created.

    """

    def __init__(self, run_dir: Path, *, pack: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.directory = self.run_dir / EVIDENCE_DIR
        self.pack: PackWriter | None = None
        if pack:
            self.pack = PackWriter(self.run_dir / PACK_FILE)
        else:
            self.directory.mkdir(exist_ok=True)
        self._files = os.path.join(str(self.run_dir), EVIDENCE_DIR, "")
        self._sizes: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        self._total = 0
        self._stamps: dict[str, tuple[int, int]] = {}
        self.created: list[str] = []
        """Evidence files created and not yet taken (:meth:`take_created`)."""

    @property
    def total_bytes(self) -> int:
        """Bytes of distinct evidence stored so far (a running count: O(1))."""
        return self._total

    @property
    def stored_bytes(self) -> int:
        """Bytes the store wrote to disk so far: :attr:`total_bytes` plus a pack's lines."""
        return self._total if self.pack is None else self.pack.size

    def sync(self) -> None:
        """Make a pack's items durable (``fsync``; nothing without a pack or new items).

        Files of a store without a pack are synced by whoever commits them (the run
        directory writer).

        Raises:
            OSError: the fsync failed (it names the pack).

        """
        if self.pack is not None:
            self.pack.sync()

    def close(self, *, sync: bool = True) -> None:
        """Close a pack (fsynced unless ``sync`` is False); reads after it open the file.

        Raises:
            OSError: the fsync failed (the pack is closed anyway).

        """
        if self.pack is not None:
            self.pack.close(sync=sync)

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

        Files are not fsynced one by one: the run directory writer makes the whole
        directory durable before it renames it into place (a pack: :meth:`sync`); the
        files created are listed in :attr:`created` for a caller that syncs them.

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
            and path computed from the bytes here.

        Raises:
            OSError: the file (or the pack) cannot be written (nothing is left of it).

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
            "path": f"{EVIDENCE_DIR}/{hex_digest}",
            "source": source,
        }

    def stored_files(self) -> dict[str, tuple[int, str]]:
        """Size and ``sha256:`` digest of every file the store wrote, by run-relative path.

        A file rewritten after it was stored (:meth:`touched`) is hashed again as it is
        now (one missing or no longer a regular file is left out: the manifest sees
        what is there). Empty with a pack (a live session's pack is not a run's file).

        Raises:
            OSError: a rewritten file cannot be read.

        """
        if self.pack is not None:
            return {}
        files = {
            evidence_path_for(key): (size, digest_of_hex(key.removeprefix("evidence_")))
            for key, size in self._sizes.items()
        }
        for evidence_id in self.touched():
            rel = evidence_path_for(evidence_id)
            path = self.run_dir / rel
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                files[rel] = (len(data), digest(data))
            else:
                del files[rel]
        return files

    def take_created(self) -> list[str]:
        """The paths of the evidence files created since the last call (none with a pack)."""
        created, self.created = self.created, []
        return created

    def _store(self, data: bytes) -> str:
        """Store ``data`` once per digest; return the hex of its SHA-256."""
        hex_digest = hashlib.sha256(data).hexdigest()
        evidence_id = "evidence_" + hex_digest
        if evidence_id in self._sizes:
            return hex_digest
        if self.pack is not None:
            self._offsets[evidence_id] = self.pack.append(hex_digest, data)
            self._sizes[evidence_id] = len(data)
            self._total += len(data)
            return hex_digest
        target = self._files + hex_digest  # os.path.join(run_dir, evidence/<hex>)
        fd = os.open(target, _CREATE, 0o666)
        try:
            written = os.write(fd, data)  # all of it, but for a short write
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(fd, view) :]
            stat = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(target)
            raise OSError(exc.errno, exc.strerror, target) from exc
        os.close(fd)
        self._sizes[evidence_id] = len(data)
        self._total += len(data)
        self._stamps[evidence_id] = (stat.st_size, stat.st_mtime_ns)
        self.created.append(target)
        return hex_digest

    def touched(self) -> list[str]:
        """Evidence ids whose file changed size or mtime since it was stored (one stat each).

        Something wrote into the run after the bytes were recorded (an extension that
        re-encoded evidence); the caller re-hashes those files so the checks see it.
        A pack's items are never rewritten in place: always empty with a pack.
        """
        out: list[str] = []
        if self.pack is not None:
            return out
        for evidence_id, stamp in self._stamps.items():
            try:
                stat = (self.run_dir / evidence_path_for(evidence_id)).lstat()
            except OSError:
                out.append(evidence_id)
                continue
            if (stat.st_size, stat.st_mtime_ns) != stamp:
                out.append(evidence_id)
        return out

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
        """The exact bytes of stored evidence (from the pack, with one).

        Raises:
            InputError: no such evidence in this run.

        """
        size = self.size_of(evidence_id)
        if self.pack is not None:
            return self._from_pack(evidence_id, 0, size)
        return (self.run_dir / evidence_path_for(evidence_id)).read_bytes()

    def _from_pack(self, evidence_id: str, start: int, length: int) -> bytes:
        assert self.pack is not None
        offset = self._offsets[evidence_id] + start
        if not self.pack.closed:
            return self.pack.read(offset, length)
        with self.pack.path.open("rb") as file:
            file.seek(offset)
            return file.read(length)

    def support(self, evidence_id: str, start: int, end: int) -> SupportRef:
        """The :class:`SupportRef` of bytes ``[start, end)`` of an evidence file.

        Offsets count from the first byte of *this evidence file*.

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
        if self.pack is not None:
            data = self._from_pack(evidence_id, start, end - start)
        else:
            with (self.run_dir / evidence_path_for(evidence_id)).open("rb") as file:
                file.seek(start)
                data = file.read(end - start)
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
