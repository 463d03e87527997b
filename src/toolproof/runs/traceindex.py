"""A recorded trace indexed by key, read back from the file: nothing held per event.

A frozen execution (``toolproof replay``, finalizing a session) serves each call, model
turn, read and prompt get from the recorded trace. :class:`TraceIndex` is built in the
one pass that reads the trace (:meth:`TraceIndex.add`, a consumer of
:meth:`~toolproof.verify.view.RunView.scan`): for each event a frozen step is served
from, one 8-byte entry, a 26-bit hash of its key and the 38-bit byte offset of its
line; the events themselves are dropped. :meth:`TraceIndex.find` reads the lines under
a key back from the file (``pread``) and parses them, keeping only those whose key is
the one asked (a hash collision costs a read, never a wrong answer). Memory: 8 bytes
per indexed event (two a tool call: ``tool_called``, ``tool_returned``), sorted in
chunks of :data:`CHUNK` and merged once, plus one line at a time.

Keys (``kind``, ``key``):

* ``("call", call_id)``: ``tool_called``, ``tool_returned``, ``failure_observed``,
  ``request_relayed``, ``policy_decided`` and the approval events of a call;
* ``("step", step)``: ``resource_read`` and ``prompt_got``;
* ``("turn", step)``: ``model_turn`` and the ``evidence_registered`` events of its step
  written before it (its request's, response's and streamed bytes).

:attr:`TraceIndex.stop` is where a wall-clock budget stopped the recorded run (the
``idx`` of its ``run_failed``), for :class:`~toolproof.runs.calls.FrozenClock`.
"""

from __future__ import annotations

import heapq
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolproof.bundle.trace import MAX_LINE_BYTES, TraceLine, TraceReader
from toolproof.contract.trace import (
    TRACE_EVENT_ADAPTER,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalSkipped,
    EvidenceRegistered,
    FailureObserved,
    ModelTurn,
    PolicyDecided,
    PromptGot,
    RequestRelayed,
    ResourceRead,
    RunFailed,
    ToolCalled,
    ToolReturned,
    TraceEvent,
)
from toolproof.errors import InputError

__all__ = ["CHUNK", "TraceIndex"]

CHUNK = 1 << 16
"""Entries sorted at a time while the index is built (then merged once)."""
_OFFSET_BITS = 38
_MAX_OFFSET = (1 << _OFFSET_BITS) - 1
_HASH_MASK = (1 << (64 - _OFFSET_BITS)) - 1
_READ = 64 * 1024
_BY_CALL = (
    ToolCalled,
    ToolReturned,
    FailureObserved,
    RequestRelayed,
    PolicyDecided,
    ApprovalRequested,
    ApprovalDecided,
    ApprovalSkipped,
)


def _hash(kind: str, key: str) -> int:
    return hash((kind, key)) & _HASH_MASK


def _keys(event: TraceEvent) -> tuple[str, str] | None:
    """The key ``event`` is indexed under (``("turn", step)`` evidence aside), or ``None``."""
    if isinstance(event, _BY_CALL):
        return "call", event.call_id
    if isinstance(event, ResourceRead | PromptGot):
        return "step", event.step
    if isinstance(event, ModelTurn):
        return "turn", event.step
    return None


class TraceIndex:
    """The events of a trace file by key, read back on demand; see the module docstring.

    Args:
        path: the trace file (read again by :meth:`find` and :meth:`events`; it must not
            change while the index is used: a line that no longer parses is an
            :class:`~toolproof.errors.InputError`).
        max_line_bytes: the longest line read back.

    Attributes:
        stop: the ``idx`` of the first ``run_failed`` of a wall-clock budget, or ``None``.
        count: events added.

    """

    def __init__(self, path: Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.max_line_bytes = max_line_bytes
        self.stop: int | None = None
        self.count = 0
        self._stop_at = 0  # the byte offset of the stop's line
        self._cut: int | None = None
        self._open = array("Q")
        self._chunks: list[array[int]] = []
        self._sorted: array[int] | None = None
        self._step = ""
        self._evidence: list[int] = []  # offsets of this step's evidence_registered lines
        self._fd = -1

    def add(self, line: TraceLine) -> None:
        """Index the parsed ``line`` (a consumer of a scan, in trace order).

        Raises:
            InputError: the line starts past the 256 GiB an entry can point at.

        """
        event = line.event
        if event is None:
            return
        self.count += 1
        if event.step != self._step:
            self._step, self._evidence = event.step, []
        if isinstance(event, EvidenceRegistered):
            self._evidence.append(line.offset)
            return
        if (
            self.stop is None
            and isinstance(event, RunFailed)
            and event.detail.get("budget") == "wall_seconds"
        ):
            self.stop, self._stop_at = event.idx, line.offset
        key = _keys(event)
        if key is None:
            return
        if isinstance(event, ModelTurn):
            for offset in self._evidence:
                self._enter(key, offset)
            self._evidence = []
        self._enter(key, line.offset)

    def _enter(self, key: tuple[str, str], offset: int) -> None:
        if offset > _MAX_OFFSET:
            raise InputError(
                f"{self.path}: a trace line at byte offset {offset} is past the "
                f"{_MAX_OFFSET + 1} bytes a replay indexes",
                path=str(self.path),
            )
        self._open.append((_hash(*key) << _OFFSET_BITS) | offset)
        if len(self._open) >= CHUNK:
            self._chunks.append(array("Q", sorted(self._open)))
            self._open = array("Q")

    def cut(self, offset: int) -> None:
        """Forget every event whose line starts at or past byte ``offset`` (a dropped tail)."""
        self._cut = offset
        if self.stop is not None and self._stop_at >= offset:
            self.stop = None

    def _entries(self) -> array[int]:
        """Every entry, sorted (merged on first use; nothing is added after that)."""
        if self._sorted is None:
            chunks = [*self._chunks, array("Q", sorted(self._open))]
            self._chunks, self._open = [], array("Q")
            merged = heapq.merge(*chunks) if len(chunks) > 1 else chunks[0]
            cut = self._cut
            kept = merged if cut is None else (e for e in merged if e & _MAX_OFFSET < cut)
            self._sorted = array("Q", kept)
        return self._sorted

    def __len__(self) -> int:
        """Entries indexed."""
        return len(self._entries())

    def _line(self, offset: int) -> bytes:
        """The line starting at ``offset``, without its newline.

        Raises:
            InputError: no whole line of at most ``max_line_bytes`` starts there.

        """
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        parts: list[bytes] = []
        at = offset
        while True:
            block = os.pread(self._fd, _READ, at)
            end = block.find(b"\n")
            if end >= 0:
                parts.append(block[:end])
                return b"".join(parts)
            parts.append(block)
            at += len(block)
            if not block or at - offset > self.max_line_bytes:
                raise InputError(
                    f"{self.path}: no whole trace line at byte offset {offset} (the file "
                    "changed since it was read)",
                    path=str(self.path),
                )

    def _event(self, offset: int) -> TraceEvent:
        data = self._line(offset)
        try:
            return TRACE_EVENT_ADAPTER.validate_json(data)  # checked when it was scanned
        except ValueError:
            raise InputError(
                f"{self.path}: the trace line at byte offset {offset} no longer parses (the "
                "file changed since it was read)",
                path=str(self.path),
            ) from None

    def find(self, kind: str, key: str) -> list[TraceEvent]:
        """The events indexed under ``(kind, key)``, in trace order (read back from the file).

        Raises:
            InputError: the file changed since it was indexed.

        """
        entries = self._entries()
        low = _hash(kind, key) << _OFFSET_BITS
        high = low + (1 << _OFFSET_BITS)
        found: list[TraceEvent] = []
        at = bisect_left(entries, low)
        while at < len(entries) and entries[at] < high:
            event = self._event(entries[at] & _MAX_OFFSET)
            at += 1
            if _keys(event) == (kind, key) or (
                kind == "turn" and isinstance(event, EvidenceRegistered) and event.step == key
            ):
                found.append(event)
        return found

    def events(self) -> Iterator[TraceEvent]:
        """Every event of the trace again, in order, one line at a time (a second pass).

        Raises:
            InputError: a line no longer parses (the file changed since it was indexed).

        """
        reader = TraceReader(self.path, max_line_bytes=self.max_line_bytes)
        for raw in reader.lines():
            if raw.data is None:
                raise InputError(
                    f"{self.path}: the trace line at byte offset {raw.offset} is longer than "
                    f"{self.max_line_bytes} bytes",
                    path=str(self.path),
                )
            try:
                yield TRACE_EVENT_ADAPTER.validate_json(raw.data)
            except ValueError:
                raise InputError(
                    f"{self.path}: the trace line at byte offset {raw.offset} no longer parses",
                    path=str(self.path),
                ) from None

    def close(self) -> None:
        """Close the file :meth:`find` reads (opened again on the next find)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TraceIndex:
        """The index itself; leaving closes its file."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the file (:meth:`close`)."""
        self.close()
