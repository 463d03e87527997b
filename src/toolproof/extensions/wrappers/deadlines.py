"""One timer per event loop for every pending ``timeout`` call: a deadline table.

``asyncio.timeout`` schedules and cancels a loop timer per call (about 5 us on
CPython 3.11). The ``timeout`` wrapper instead records each call's deadline in a
heap of its event loop's :class:`Deadlines` and keeps **one** loop timer, at the
earliest deadline. Calls that end before their deadline only mark their entry
finished; finished entries leave the heap when the timer reaches them, or in a
compaction once they are more than half of it, so the heap holds at most about
twice the calls in flight. When the timer fires, every call whose deadline passed
has its task cancelled, exactly as ``asyncio.timeout`` does (``task.cancel()``; the
wrapper then ``uncancel()``-s and reports the timeout only when no other
cancellation is pending), and the timer moves to the next deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
import types
import weakref
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["Deadline", "Deadlines", "deadlines", "into", "resume"]

_RESOLUTION = time.get_clock_info("monotonic").resolution
_COMPACT_AT = 64


class Deadline:
    """One call's entry: its task, its deadline, and whether it ended or expired.

    Attributes:
        task: the task running the call (``None`` once it ended: the table holds no
            task, and through it no loop, longer than the call).
        when: the deadline, in the loop's clock (``loop.time()`` seconds).
        finished: the call ended (its entry is dropped lazily).
        expired: the deadline passed while the call ran: its task was cancelled.

    """

    __slots__ = ("expired", "finished", "task", "when")

    def __init__(self, task: asyncio.Task[Any], when: float) -> None:
        self.task: asyncio.Task[Any] | None = task
        self.when = when
        self.finished = False
        self.expired = False


class Deadlines:
    """The deadline heap of one event loop and its single timer.

    The table refers to its loop only through the calls in flight and, weakly, the
    pending timer, so a loop that ends with it is dropped (see :func:`deadlines`).
    """

    __slots__ = ("__weakref__", "_finished", "_heap", "_order", "_timer", "_timer_when")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        self._timer_when = math.inf
        self._finished = 0

    def __len__(self) -> int:
        """Entries in the heap (pending calls plus finished ones not yet dropped)."""
        return len(self._heap)

    def add(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], when: float
    ) -> Deadline:
        """Record that ``task`` must be cancelled at ``when`` (the loop's clock, seconds)."""
        entry = Deadline(task, when)
        heapq.heappush(self._heap, (when, next(self._order), entry))
        if when < self._timer_when:
            timer = self._timer() if self._timer is not None else None
            if timer is not None:
                timer.cancel()
            self._schedule(loop, when)
        return entry

    def _schedule(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer = weakref.ref(loop.call_at(when, self._fire))
        self._timer_when = when

    def finish(self, entry: Deadline) -> None:
        """Mark ``entry``'s call ended; compact the heap when finished entries dominate it."""
        if entry.finished:
            return
        entry.finished = True
        entry.task = None
        if entry.expired:
            return  # already out of the heap
        self._finished += 1
        if self._finished > _COMPACT_AT and self._finished * 2 > len(self._heap):
            self._heap = [item for item in self._heap if not item[2].finished]
            heapq.heapify(self._heap)
            self._finished = 0

    def _fire(self) -> None:
        self._timer = None
        self._timer_when = math.inf
        loop = asyncio.get_running_loop()
        now = loop.time() + _RESOLUTION
        heap = self._heap
        while heap and (heap[0][2].finished or heap[0][0] <= now):
            _, _, entry = heapq.heappop(heap)
            if entry.finished:
                self._finished -= 1
                continue
            entry.expired = True
            if entry.task is not None:
                entry.task.cancel()
        if heap:
            self._schedule(loop, heap[0][0])


_TABLES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[weakref.ref[asyncio.AbstractEventLoop] | None, Deadlines | None] = (None, None)


def deadlines(loop: asyncio.AbstractEventLoop) -> Deadlines:
    """The :class:`Deadlines` of ``loop`` (made on first use; dropped with the loop)."""
    global _last
    ref, table = _last
    if ref is not None and ref() is loop and table is not None:
        return table
    table = _TABLES.get(loop)
    if table is None:
        table = _TABLES[loop] = Deadlines()
    _last = (weakref.ref(loop), table)
    return table


@types.coroutine
def into(step: Coroutine[Any, Any, Any], box: list[Any]) -> Generator[Any, Any, None]:
    """``await step`` and append its value to ``box``; the generator itself returns ``None``.

    Lets the ``timeout`` wrapper run a call's first step itself without an exception:
    ``for yielded in into(step, box): break`` either ends the loop normally (``step``
    returned without suspending, its value is ``box[0]``; a generator that returns
    ``None`` ends a ``for`` without raising ``StopIteration`` into Python code, where a
    bare ``step.send(None)`` would) or stops at the first value ``step`` yields, to be
    finished with :func:`resume`. What ``step`` raises propagates.
    """
    box.append((yield from step))


@types.coroutine
def resume(step: Generator[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Finish ``await step`` after its first step (``next(step)``) yielded ``yielded``.

    The rest of what ``await`` (PEP 380's ``yield from``) does: each value ``step``
    yields goes up to the task, each value or exception the task sends in goes down
    to ``step`` (``close()`` on ``GeneratorExit``). Lets the ``timeout`` wrapper run
    the first step itself and record a deadline only when the call suspends. From the
    first ``None`` the task sends (how an asyncio task resumes a coroutine) the rest is
    a plain ``yield from step``, delegated by the interpreter.

    Returns:
        ``step``'s return value.

    Raises:
        BaseException: what ``step`` raises (a cancellation thrown in included).

    """
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:
            try:
                yielded = step.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            if sent is None:
                return (yield from step)  # which starts with step.send(None)
            try:
                yielded = step.send(sent)
            except StopIteration as done:
                return done.value
