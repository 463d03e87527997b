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
import os
from pathlib import Path
from typing import Any

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.evidence import (
    EvidenceRecord,
    EvidenceSource,
    SupportRef,
    evidence_path_for,
)
from toolproof.contract.layout import EVIDENCE_DIR
from toolproof.errors import InputError
from toolproof.evidence.encoding import JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE
from toolproof.evidence.pack import PACK_FILE, PackWriter
from toolproof.identity import canonical_json, digest, digest_of_hex, sha256_hex

__all__ = ["EvidenceStore", "record_from_json", "result_record", "span_ref"]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
"""How an evidence file is opened: created now, never an existing one."""


def _encode_str(text: str) -> bytes:
    """The canonical JSON of a string."""
    return canonical_json(text)


def _result_record_template() -> bytes:
    """The canonical JSON of a ``tool_result`` record as a format, up to its step's JSON.

    Slots, in order: the hex digest three times (``digest``, ``id``, ``path``), the media
    type's JSON, the size and the call id (unquoted ASCII); the step's JSON and ``}}``
    follow. Compiled from :func:`canonical_json` of a sample record, so the members
    sort exactly as the encoder sorts them; checked against it at import.
    """
    hex_mark, media_mark, size_mark, call_mark, step_mark = "H" * 64, "M", 7**19, "C", "S"
    sample = {
        "schema_version": SCHEMA_VERSION,
        "id": "evidence_" + hex_mark,
        "digest": digest_of_hex(hex_mark),
        "size": size_mark,
        "media_type": media_mark,
        "path": f"{EVIDENCE_DIR}/{hex_mark}",
        "source": {
            "schema_version": SCHEMA_VERSION,
            "kind": "tool_result",
            "step": step_mark,
            "call": call_mark,
            "detail": {},
        },
    }
    encoded = canonical_json(sample).replace(b"%", b"%%")
    tail = b'"step":"S"}}'
    assert encoded.endswith(tail), encoded
    fmt = encoded[: -len(tail) + len(b'"step":')]
    fmt = fmt.replace(hex_mark.encode(), b"%b").replace(b'"M"', b"%b")
    fmt = fmt.replace(str(size_mark).encode(), b"%d").replace(b'"call":"C"', b'"call":"%b"')
    assert fmt.count(b"%b") == 5 and fmt.count(b"%d") == 1, fmt
    return fmt


_RESULT_RECORD = _result_record_template()
"""The spliced ``tool_result`` record of :meth:`EvidenceStore.add_result`."""
_MEDIA_JSON = {media: canonical_json(media) for media in (JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE)}


def record_from_json(plain: dict[str, Any]) -> EvidenceRecord:
    """The :class:`EvidenceRecord` of a record built by :meth:`EvidenceStore.add`, unvalidated.

    Only for records this store built (valid by construction); anything read from
    outside goes through ``EvidenceRecord.model_validate``.
    """
    fields = dict(plain)
    fields["source"] = EvidenceSource.from_trusted(dict(fields["source"]))
    return EvidenceRecord.from_trusted(fields)


def result_record(
    hex_digest: str,
    size: int,
    media_type: str,
    step: str,
    call: str | None,
    *,
    kind: str = "tool_result",
) -> dict[str, Any]:
    """The plain JSON of an evidence record (no detail), as ``EvidenceStore.add`` builds it.

    Args:
        hex_digest: the 64 hex digits of the bytes' SHA-256.
        size: their size in bytes.
        media_type: their media type.
        step: the plan step of the call.
        call: the call id (``None``: bytes of no call, a model turn's).
        kind: the source kind (``tool_result``; a model turn's ``model_request``...).

    Returns:
        The record's plain JSON (a new dict each call; :func:`record_from_json` makes
        the model of it).

    """
    source = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "step": step,
        "call": call,
        "detail": {},
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "id": "evidence_" + hex_digest,
        "digest": digest_of_hex(hex_digest),
        "size": size,
        "media_type": media_type,
        "path": f"{EVIDENCE_DIR}/{hex_digest}",
        "source": source,
    }


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

    def put(self, data: bytes, *, media_type: str, source: EvidenceSource) -> EvidenceRecord:
        """Store ``data`` exactly (once per digest) and return its record.

        Files are not fsynced one by one: the run directory writer makes the whole
        directory durable before it renames it into place (a pack: :meth:`sync`).

        Args:
            data: the evidence bytes, as they will be cited.
            media_type: e.g. ``application/json`` or ``text/plain; charset=utf-8``.
            source: where the bytes came from.

        Raises:
            OSError: the file cannot be written (nothing is left of it).

        """
        digest, evidence_id, _ = self._store(data)
        return EvidenceRecord(
            id=evidence_id,
            digest=digest,
            size=len(data),
            media_type=media_type,
            path=evidence_path_for(evidence_id),
            source=source,
        )

    def add(
        self,
        data: bytes,
        *,
        media_type: str,
        kind: str,
        step: str,
        call: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], str | None]:
        """:meth:`put` for the recorder's hot path: the record as plain JSON, no model.

        Every field is computed here (id, digest and path from the bytes), so the record
        is valid by construction; :func:`record_from_json` turns it into the model, and a
        test holds it equal to the validated model's JSON.

        Returns:
            The record's plain JSON, and the path of the file created (``None`` when
            identical bytes were already stored, and always with a pack: no file is
            created, the pack is synced as one file).

        Raises:
            OSError: the file cannot be written (nothing is left of it).

        """
        digest, evidence_id, created = self._store(data)
        source = {
            "schema_version": SCHEMA_VERSION,
            "kind": kind,
            "step": step,
            "call": call,
            "detail": dict(detail or {}),
        }
        record = {
            "schema_version": SCHEMA_VERSION,
            "id": evidence_id,
            "digest": digest,
            "size": len(data),
            "media_type": media_type,
            "path": evidence_path_for(evidence_id),
            "source": source,
        }
        return record, created

    def add_result(
        self, data: bytes, media_type: str, step: str, step_json: bytes, call: str
    ) -> tuple[dict[str, Any], bytes, str | None]:
        """:meth:`add` of a tool call's value (kind ``tool_result``, no detail), spliced.

        The recorder's hot path: the record's canonical JSON is spliced from a template
        compiled at import (:data:`_RESULT_RECORD`) instead of encoded from the dict; a
        test holds it to ``canonical_json`` of the record :meth:`add` builds.

        Args:
            data: the value's evidence bytes.
            media_type: their media type.
            step: the plan step of the call.
            step_json: the canonical JSON of ``step``.
            call: the call id (``call_<hex>``: ASCII, never escaped).

        Returns:
            ``(record, record_json, created)``: the record's plain JSON (as :meth:`add`
            returns it), its canonical JSON, and the path of the file created (``None``
            with a pack or when identical bytes were already stored).

        Raises:
            OSError: the bytes cannot be written (nothing is left of them).

        """
        hex_part, record_json, created = self.add_result_json(data, media_type, step_json, call)
        return result_record(hex_part, len(data), media_type, step, call), record_json, created

    def add_result_json(
        self, data: bytes, media_type: str, step_json: bytes, call: str
    ) -> tuple[str, bytes, str | None]:
        """:meth:`add_result` without the record's plain JSON (a live session's hot path).

        Returns:
            ``(hex, record_json, created)``: the 64 hex digits of the bytes' SHA-256 (the
            record is ``result_record(hex, len(data), media_type, step, call)``), the
            record's canonical JSON and the file created, as :meth:`add_result`.

        Raises:
            OSError: the bytes cannot be written (nothing is left of them).

        """
        hex_bytes, hex_part, created = self._store_hex(data)
        media_json = _MEDIA_JSON.get(media_type) or _encode_str(media_type)
        slots = (hex_bytes, hex_bytes, media_json, hex_bytes, len(data), call.encode("ascii"))
        return hex_part, _RESULT_RECORD % slots + step_json + b"}}", created

    def store_pair(self, first: bytes, second: bytes) -> tuple[bytes, bytes]:
        """Store two byte strings of a pack store with one write (a model turn's bodies).

        What ``_store(first)`` then ``_store(second)`` store (each once per digest, in
        that order, the pack's bytes the same), but the new items are appended in one
        ``writev`` (:meth:`PackWriter.append_pair`).

        Args:
            first: the first bytes (a turn's request).
            second: the second bytes (its response).

        Returns:
            The 64 lowercase hex digits (ASCII) of each one's SHA-256: its digest is
            ``sha256:<hex>``, its id ``evidence_<hex>``, its path ``evidence/<hex>``.

        Raises:
            OSError: the pack cannot be written: neither of the two is stored.
            ValueError: the store has no pack.

        """
        pack = self.pack
        if pack is None:
            raise ValueError("store_pair: the store has no pack")
        first_hex, second_hex = sha256_hex(first), sha256_hex(second)
        sizes = self._sizes
        first_id = "evidence_" + first_hex.decode("ascii")
        second_id = "evidence_" + second_hex.decode("ascii")
        first_new = first_id not in sizes
        second_new = second_id not in sizes and second_id != first_id
        if first_new and second_new:  # a turn's usual case: one write
            first_at, second_at = pack.append_pair(first_hex, first, second_hex, second)
            offsets = self._offsets
            offsets[first_id], offsets[second_id] = first_at, second_at
            sizes[first_id], sizes[second_id] = len(first), len(second)
            self._total += len(first) + len(second)
        elif first_new:
            self._add_to_pack(first_id, first_hex, first)
        elif second_new:
            self._add_to_pack(second_id, second_hex, second)
        return first_hex, second_hex

    def _add_to_pack(self, evidence_id: str, hex_bytes: bytes, data: bytes) -> None:
        """Append ``data`` (not stored yet) to the pack as ``evidence_id``."""
        assert self.pack is not None
        self._offsets[evidence_id] = self.pack.append(hex_bytes, data)
        self._sizes[evidence_id] = len(data)
        self._total += len(data)

    def _store(self, data: bytes) -> tuple[str, str, str | None]:
        _, hex_digest, created = self._store_hex(data)
        return digest_of_hex(hex_digest), "evidence_" + hex_digest, created

    def _store_hex(self, data: bytes) -> tuple[bytes, str, str | None]:
        """Store ``data`` once per digest: its hex SHA-256 (bytes and text), the file created."""
        hex_bytes = sha256_hex(data)
        hex_digest = hex_bytes.decode("ascii")
        evidence_id = "evidence_" + hex_digest  # as contract.evidence.evidence_id_for
        if evidence_id in self._sizes:
            return hex_bytes, hex_digest, None
        if self.pack is not None:
            self._add_to_pack(evidence_id, hex_bytes, data)
            return hex_bytes, hex_digest, None
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
        return hex_bytes, hex_digest, target

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
