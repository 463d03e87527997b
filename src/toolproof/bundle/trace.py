"""``trace.jsonl``: one canonical JSON event per line, each chained to the one before.

The writer assigns ``idx`` and ``prev`` itself, so a trace it writes is chained by
construction; the reader never trusts a line: it reports, per line, the parsed event
or why the line could not be read, and the digest of the line's bytes.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.contract.trace import TRACE_EVENT_ADAPTER, EventBase, TraceEvent
from toolproof.errors import InputError, validation_problem
from toolproof.identity import canonical_json, digest, hash_digest

__all__ = [
    "MAX_LINE_BYTES",
    "READ_BLOCK_BYTES",
    "ParsedLines",
    "RawLine",
    "TraceLine",
    "TraceReader",
    "TraceWriter",
    "event_json",
    "parse_event",
    "read_trace",
]

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest trace line a reader accepts (256 MiB, the largest frame a process backend
carries, so any result a tool can return fits); a longer line is refused without being
held in memory."""

READ_BLOCK_BYTES = 1024 * 1024
"""Bytes a :class:`TraceReader` reads at a time (1 MiB)."""

_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Field values an event holds as they are; anything else is a model (``to_json()``)."""
_HEADS: dict[type[EventBase], dict[str, Any]] = {}


def _head(cls: type[EventBase]) -> dict[str, Any]:
    """The members every event of ``cls`` starts from: ``type``, ``schema_version``, defaults."""
    head = _HEADS.get(cls)
    if head is None:
        head = {}
        for name, info in cls.model_fields.items():
            if name in cls.OMITTED_WHEN_NONE and info.get_default() is None:
                continue  # absent from the JSON until given (EventBase.OMITTED_WHEN_NONE)
            if name not in ("idx", "prev") and not info.is_required():
                head[name] = info.get_default(call_default_factory=True)
        _HEADS[cls] = head
    return head


def event_json(cls: type[EventBase], fields: dict[str, Any]) -> dict[str, Any]:
    """The plain JSON of an event of class ``cls`` without its ``idx`` and ``prev``.

    What ``cls(idx=..., prev=..., **fields).to_json()`` holds besides those two: the
    class's defaults for the fields not given, and each given field as it is (a model
    as its ``to_json()``). Not validated: the recorder gives fields it computed (a
    test holds every event kind to the model's JSON).

    Args:
        cls: a trace event class (``StepStarted``...).
        fields: its fields other than ``idx`` and ``prev``.

    """
    event = dict(_head(cls))
    for name, value in fields.items():
        event[name] = value if type(value) in _PLAIN else value.to_json()
    return event


class TraceWriter:
    """Appends events to ``trace.jsonl`` with ``idx`` and ``prev`` filled in.

    Lines are kept in memory until :meth:`flush` hands them to the OS in one
    ``write(2)`` (a block of events lands together, and survives a killed process
    once flushed); :meth:`sync` makes what was flushed durable (``fsync(2)``). A writer
    whose write failed (a full disk: ``ENOSPC``) is *broken*: the file may end in a
    torn line, and every later :meth:`emit` or :meth:`flush` raises the first error
    again, so nothing is ever chained onto a torn line.

    Args:
        path: the file to create (it must not exist).
        buffer_bytes: flush on its own once this many bytes are pending (``0``: only
            on :meth:`flush` and :meth:`close`).
        defer_hash: leave the whole file's running SHA-256 to :meth:`hash_written`
            (a group-commit syncer thread calls it per batch, off the recording
            thread; :meth:`close` hashes the rest) instead of hashing each write.

    """

    def __init__(
        self, path: Path, *, buffer_bytes: int = 1 << 20, defer_hash: bool = False
    ) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        self._closed = False
        self._pending: list[bytes] = []
        """Lines not yet written, as chunks that join into newline-terminated lines (a
        chained block of lines each with its newline, or one line then ``b"\\n"``)."""
        self._pending_bytes = 0
        self._buffer_bytes = buffer_bytes
        self._prev: str | None = None
        """The previous line's digest, ``sha256:<hex>`` (``None`` before the first)."""
        self._count = 0
        self._hash = hashlib.sha256()
        self._unhashed: deque[bytes] | None = deque() if defer_hash else None
        """Written chunks not in :attr:`_hash` yet, in order (``defer_hash`` only)."""
        self._hashing = threading.Lock()
        self._size = 0
        self.broken: OSError | None = None
        """The write error that broke the writer, or ``None``."""

    @property
    def count(self) -> int:
        """How many events were emitted (flushed or still pending)."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes of the trace so far (written or pending)."""
        return self._size

    @property
    def fileno(self) -> int:
        """The file descriptor of the open trace (for a syncer that fsyncs it)."""
        return self._fd

    def emit(self, cls: type[Any], **fields: Any) -> TraceEvent:
        """Build an event of class ``cls`` at the next position and append its line.

        Args:
            cls: a trace event class (``StepStarted``, ``ToolCalled``...).
            **fields: its fields other than ``idx`` and ``prev``.

        Returns:
            The event (validated).

        Raises:
            CanonicalizationError: a field holds a value with no canonical JSON form.
            OSError: the writer is broken (see the class docstring).

        """
        idx, prev = self.next_position()
        event: TraceEvent = cls(idx=idx, prev=prev, **fields)
        self.append_line(canonical_json(event.to_json()))
        return event

    def next_position(self) -> tuple[int, str | None]:
        """``(idx, prev)`` of the next event: its position and the previous line's digest."""
        return self._count, self._prev

    def append_events(self, events: list[dict[str, Any]]) -> None:
        """Append a block of events in order, each chained to the one before, as one chunk.

        Args:
            events: each event's plain JSON without ``idx`` and ``prev``
                (:func:`event_json`); the writer sets both (the dicts gain them) and
                writes each event's canonical JSON as a line.

        Raises:
            CanonicalizationError: an event has no canonical JSON form (nothing of the
                block is appended).
            OSError: the writer is broken.

        """
        if self.broken is not None:
            raise self.broken
        if not events:
            return
        idx, prev = self.next_position()
        chunks: list[bytes] = []
        for event in events:
            event["idx"], event["prev"] = idx, prev
            line = canonical_json(event)
            prev = digest(line)
            chunks += (line, b"\n")
            idx += 1
        joined = b"".join(chunks)
        self._prev = prev
        self._pending.append(joined)
        self._count = idx
        size = len(joined)
        self._pending_bytes += size
        self._size += size
        if self._buffer_bytes and self._pending_bytes >= self._buffer_bytes:
            self.flush()

    def append_line(self, line: bytes) -> None:
        """Append one event's canonical JSON line (built for :meth:`next_position`).

        The caller guarantees ``line`` is the canonical JSON of a valid event whose
        ``idx`` and ``prev`` are :meth:`next_position`; :meth:`emit` is the checked
        way. The line is pending until :meth:`flush`.

        Raises:
            OSError: the writer is broken.

        """
        if self.broken is not None:
            raise self.broken
        self._prev = digest(line)
        self._pending += (line, b"\n")
        size = len(line) + 1
        self._pending_bytes += size
        self._size += size
        self._count += 1
        if self._buffer_bytes and self._pending_bytes >= self._buffer_bytes:
            self.flush()

    def flush(self) -> None:
        """Hand every pending line to the OS in one write; they survive a killed process.

        Raises:
            OSError: the write failed (the writer is broken from now on; see the class
                docstring) or the writer was broken before.

        """
        if self.broken is not None:
            raise self.broken
        if not self._pending:
            return
        pending = self._pending
        joined = pending[0] if len(pending) == 1 else b"".join(pending)
        if self._unhashed is None:
            self._hash.update(joined)
        else:  # deque.append is atomic: the hashing thread pops from the other end
            self._unhashed.append(joined)
        pending.clear()
        self._pending_bytes = 0
        try:
            written = os.write(self._fd, joined)
            if written < len(joined):  # a partial write (a signal, a filling disk): the rest
                data = memoryview(joined)[written:]
                while data:
                    data = data[os.write(self._fd, data) :]
        except OSError as exc:
            self.broken = OSError(exc.errno, exc.strerror, str(self.path))  # name the file
            raise self.broken from exc

    def sync(self) -> None:
        """Make every flushed line durable (``fsync(2)``); pending lines are not flushed.

        Raises:
            OSError: the fsync failed.

        """
        if not self._closed:
            os.fsync(self._fd)

    def close(self, *, sync: bool = True) -> tuple[int, str]:
        """Flush (fsync unless ``sync`` is False) and close; return size in bytes and digest.

        Raises:
            OSError: the final write or fsync failed (the file is closed anyway).

        """
        if not self._closed:
            try:
                self.flush()
                if sync:
                    os.fsync(self._fd)
            except OSError as exc:
                if exc.filename is None:
                    raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
                raise
            finally:
                self._closed = True
                os.close(self._fd)
        self.hash_written()
        return self._size, hash_digest(self._hash)

    def hash_written(self) -> None:
        """Add every chunk written so far to the whole file's running SHA-256 (``defer_hash``).

        Safe to call from another thread while this one writes: chunks are taken in
        the order they were written, under a lock, and hashed as one buffer (which
        ``hashlib`` hashes without holding the GIL once it is 2 KiB or more). Nothing
        to do without ``defer_hash``.
        """
        unhashed = self._unhashed
        if unhashed is None:
            return
        with self._hashing:
            chunks = []
            while unhashed:
                chunks.append(unhashed.popleft())
            if chunks:
                self._hash.update(b"".join(chunks))


@dataclass(frozen=True)
class TraceLine:
    """One line of a trace as read.

    Attributes:
        position: the line's position (from 0).
        digest: ``sha256:<hex>`` of the line's bytes without the newline.
        event: the parsed event, or ``None`` when the line is not a valid event.
        problem: why it is not (``None`` when it is); includes non-canonical bytes.
        offset: the byte offset of the line's first byte in the file.

    """

    position: int
    digest: str
    event: TraceEvent | None
    problem: str | None
    offset: int = 0


@dataclass(frozen=True)
class ParsedLines:
    """Lines of a trace already parsed, by position: each one's digest and event.

    Two flat lists (the collector never walks a ``str``), not a :class:`TraceLine` each.

    Attributes:
        digests: ``sha256:<hex>`` of each line's bytes.
        events: each line's event, ``None`` for a line that did not parse.

    """

    digests: Sequence[str]
    events: Sequence[TraceEvent | None]

    @classmethod
    def of(cls, lines: Sequence[TraceLine]) -> ParsedLines:
        """The digests and events of ``lines`` (positions ``0..len(lines) - 1``, in order)."""
        return cls([line.digest for line in lines], [line.event for line in lines])

    def event(self, position: int, line_digest: str) -> TraceEvent | None:
        """The event of the line at ``position`` when its bytes hash to ``line_digest``.

        ``None`` otherwise (other bytes, a position past the lines, a line that did not
        parse). The same bytes parse the same: the event stands for a parse of them.
        """
        if position < len(self.digests) and self.digests[position] == line_digest:
            return self.events[position]
        return None


def parse_event(raw: bytes) -> tuple[TraceEvent | None, str | None]:
    """Parse one trace line (without its newline) as a canonical trace event.

    Returns:
        The event and ``None``, or ``None`` and why the line is not a valid event
        in canonical JSON form (RFC 8785) holding nothing the model does not.

    """
    try:
        event = TRACE_EVENT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        first = validation_problem(exc, empty="(event)")
        where = first.where
        return None, f"not a valid trace event: {where}: {first.message}"
    except InputError as exc:
        return None, f"not a valid trace event: {exc.message}"
    if canonical_json(event.to_json()) != raw:
        return None, "is not in canonical JSON form (RFC 8785) or holds unknown content"
    return event, None


def read_trace(data: bytes) -> tuple[list[TraceLine], str | None]:
    """Split and parse the bytes of a ``trace.jsonl`` held in memory.

    :class:`TraceReader` reads a trace file in bounded memory instead.

    Args:
        data: the whole file.

    Returns:
        The lines, and a problem with the file as a whole (a missing final newline:
        the file was truncated), or ``None``.

    """
    problem = None
    if data and not data.endswith(b"\n"):
        problem = "does not end with a newline (truncated?)"
    raws = data.split(b"\n")
    if raws and raws[-1] == b"":
        raws.pop()
    lines = []
    offset = 0
    for position, raw in enumerate(raws):
        event, line_problem = parse_event(raw)
        lines.append(TraceLine(position, digest(raw), event, line_problem, offset))
        offset += len(raw) + 1
    return lines, problem


@dataclass(frozen=True)
class RawLine:
    """One line of a trace file as a :class:`TraceReader` read it.

    Attributes:
        position: the line's position (from 0).
        offset: the byte offset of its first byte.
        data: its bytes without the newline, or ``None`` when it is longer than the
            reader's limit (it was not kept).
        length: its length in bytes without the newline.

    """

    position: int
    offset: int
    data: bytes | None
    length: int


class TraceReader:
    """Reads a trace file once, in blocks: its lines in order, in bounded memory.

    Memory is one block (:data:`READ_BLOCK_BYTES`) plus the line being assembled,
    which never exceeds ``max_line_bytes``: a longer line is yielded without its bytes
    (``data is None``) and skipped to its newline. Never ``readline()``: a 1 GB line
    costs one block of memory. Every byte read goes into :attr:`sha` and
    :attr:`size`, so the file is hashed by the same read that splits it.

    Args:
        path: the trace file.
        max_line_bytes: the longest line kept (default :data:`MAX_LINE_BYTES`).
        block_bytes: bytes per read.
        progress: called with the number of bytes of each block read.

    Attributes:
        size: bytes read so far.
        sha: the running SHA-256 (``hashlib``) of those bytes.
        ends_with_newline: after the last line, whether the file ended with a newline
            (an empty file does).

    """

    def __init__(
        self,
        path: Path,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        block_bytes: int = READ_BLOCK_BYTES,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.path = path
        self.max_line_bytes = max_line_bytes
        self.block_bytes = block_bytes
        self.progress = progress
        self.size = 0
        self.sha = hashlib.sha256()
        self.ends_with_newline = True

    def lines(self) -> Iterator[RawLine]:
        """The file's lines in order (the last one too when no newline ends it).

        Raises:
            OSError: the file cannot be read.

        """
        limit = self.max_line_bytes
        position = offset = pending = 0
        parts: list[bytes] = []
        with self.path.open("rb", buffering=0) as file:
            while block := file.read(self.block_bytes):
                self.sha.update(block)
                self.size += len(block)
                if self.progress is not None:
                    self.progress(len(block))
                start = 0
                while (end := block.find(b"\n", start)) >= 0:
                    length = pending + end - start
                    if length > limit:
                        yield RawLine(position, offset, None, length)
                    else:
                        data = block[start:end]
                        yield RawLine(position, offset, b"".join((*parts, data)), length)
                    parts.clear()
                    offset += length + 1
                    pending = 0
                    position += 1
                    start = end + 1
                tail = len(block) - start
                if tail and pending + tail <= limit:
                    parts.append(block[start:])
                else:
                    parts.clear()  # past the limit: only its length is kept
                pending += tail
        if pending:
            self.ends_with_newline = False
            data = b"".join(parts) if pending <= limit else None
            yield RawLine(position, offset, data, pending)
