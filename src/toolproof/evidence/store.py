"""The evidence store of a run: exact bytes under ``evidence/``, and spans within them.

Bytes are stored once per digest as ``evidence/<sha256 hex>`` and never re-encoded:
a :class:`SupportRef` is an interval *within that file*, so a chunk cut from the
middle of a document is cited by offsets from the chunk's first byte, never from
the document's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from toolproof.contract.evidence import (
    EvidenceRecord,
    EvidenceSource,
    SupportRef,
    evidence_id_for,
    evidence_path_for,
)
from toolproof.errors import InputError

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
    snippet = "sha256:" + hashlib.sha256(data[start:end]).hexdigest()
    return SupportRef(evidence=evidence_id, start=start, end=end, sha256=snippet)


class EvidenceStore:
    """Stores evidence bytes under a run directory's ``evidence/`` folder.

    Args:
        run_dir: the run directory being written (``evidence/`` is created if missing).

    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.directory = self.run_dir / "evidence"
        self.directory.mkdir(exist_ok=True)
        self._sizes: dict[str, int] = {}
        self._stamps: dict[str, tuple[int, int]] = {}

    @property
    def total_bytes(self) -> int:
        """Bytes of distinct evidence stored so far."""
        return sum(self._sizes.values())

    def __contains__(self, evidence_id: object) -> bool:
        return evidence_id in self._sizes

    def put(self, data: bytes, *, media_type: str, source: EvidenceSource) -> EvidenceRecord:
        """Store ``data`` exactly (once per digest) and return its record.

        Files are not fsynced one by one: the run directory writer makes the whole
        directory durable before it renames it into place.

        Args:
            data: the evidence bytes, as they will be cited.
            media_type: e.g. ``application/json`` or ``text/plain; charset=utf-8``.
            source: where the bytes came from.

        """
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        evidence_id = evidence_id_for(digest)
        path = evidence_path_for(evidence_id)
        if evidence_id not in self._sizes:
            target = self.run_dir / path
            with target.open("xb") as file:
                file.write(data)
            self._sizes[evidence_id] = len(data)
            stat = target.lstat()
            self._stamps[evidence_id] = (stat.st_size, stat.st_mtime_ns)
        return EvidenceRecord(
            id=evidence_id,
            digest=digest,
            size=len(data),
            media_type=media_type,
            path=path,
            source=source,
        )

    def touched(self) -> list[str]:
        """Evidence ids whose file changed size or mtime since it was stored (one stat each).

        Something wrote into the run after the bytes were recorded (an extension that
        re-encoded evidence); the caller re-hashes those files so the checks see it.
        """
        out = []
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
        """The exact bytes of stored evidence.

        Raises:
            InputError: no such evidence in this run.

        """
        self.size_of(evidence_id)
        return (self.run_dir / evidence_path_for(evidence_id)).read_bytes()

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
