"""``trace.jsonl``: one canonical JSON event per line, each chained to the one before.

The writer assigns ``idx`` and ``prev`` itself, so a trace it writes is chained by
construction; the reader never trusts a line: it reports, per line, the parsed event
or why the line could not be read, and the digest of the line's bytes.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from toolproof.contract.trace import TRACE_EVENT_ADAPTER, TraceEvent
from toolproof.errors import InputError
from toolproof.identity import canonical_json

__all__ = ["TraceLine", "TraceWriter", "read_trace"]


class TraceWriter:
    """Appends events to ``trace.jsonl`` with ``idx`` and ``prev`` filled in.

    Args:
        path: the file to create (it must not exist).

    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = path.open("xb")
        self._prev: str | None = None
        self._count = 0
        self._hash = hashlib.sha256()
        self._size = 0
        self.events: list[TraceEvent] = []

    @property
    def count(self) -> int:
        """How many events were written."""
        return self._count

    def emit(self, cls: type[Any], **fields: Any) -> TraceEvent:
        """Build an event of class ``cls`` at the next position and write its line.

        Args:
            cls: a trace event class (``StepStarted``, ``ToolCalled``...).
            **fields: its fields other than ``idx`` and ``prev``.

        Returns:
            The event written.

        Raises:
            CanonicalizationError: a field holds a value with no canonical JSON form.

        """
        event: TraceEvent = cls(idx=self._count, prev=self._prev, **fields)
        line = canonical_json(event.to_json())
        self._prev = "sha256:" + hashlib.sha256(line).hexdigest()
        self._file.write(line + b"\n")
        self._hash.update(line + b"\n")
        self._size += len(line) + 1
        self._count += 1
        self.events.append(event)
        return event

    def close(self, *, sync: bool = True) -> tuple[int, str]:
        """Flush (fsync unless ``sync`` is False) and close; return size in bytes and digest."""
        if not self._file.closed:
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())
            self._file.close()
        return self._size, "sha256:" + self._hash.hexdigest()


@dataclass(frozen=True)
class TraceLine:
    """One line of a trace as read.

    Attributes:
        position: the line's position (from 0).
        digest: ``sha256:<hex>`` of the line's bytes without the newline.
        event: the parsed event, or ``None`` when the line is not a valid event.
        problem: why it is not (``None`` when it is); includes non-canonical bytes.

    """

    position: int
    digest: str
    event: TraceEvent | None
    problem: str | None


def _parse(raw: bytes) -> tuple[TraceEvent | None, str | None]:
    try:
        event = TRACE_EVENT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "(event)"
        return None, f"not a valid trace event: {where}: {first['msg']}"
    except InputError as exc:
        return None, f"not a valid trace event: {exc.message}"
    if canonical_json(event.to_json()) != raw:
        return None, "is not in canonical JSON form (RFC 8785) or holds unknown content"
    return event, None


def read_trace(data: bytes) -> tuple[list[TraceLine], str | None]:
    """Split and parse the bytes of a ``trace.jsonl``.

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
    for position, raw in enumerate(raws):
        event, line_problem = _parse(raw)
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        lines.append(TraceLine(position, digest, event, line_problem))
    return lines, problem
