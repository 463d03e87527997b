"""When a recorder's writes become durable: the :class:`Durability` modes and group commit.

* ``commit``: the executor's runs. Lines stay in memory and land when the run
  directory is committed (fsynced then, renamed into place); a run killed before
  is never committed.
* ``group``: live sessions. :meth:`~toolproof.runs.recorder.Recorder.commit` writes
  the block in one ``write(2)`` before the call is answered, so a killed process
  loses nothing it acknowledged; a background thread (:class:`GroupSync`) starts a
  sync batch at most every :data:`SYNC_INTERVAL` seconds, so a power loss can lose at
  most the calls acknowledged in the last 50 ms plus the time the batch takes. On
  Linux a batch is one ``syncfs(2)`` of the run directory's filesystem (the trace and
  the evidence pack in one call, whatever the call rate; never the machine-wide
  ``sync(2)``); elsewhere it fsyncs the evidence pack and the trace. The trace's
  whole-file digest (the manifest's) is hashed by that thread too, per batch.
* ``each``: fsync on every commit (the comparison figure of the benchmark).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from enum import StrEnum

from toolproof.bundle.durable import syncfs
from toolproof.bundle.trace import TraceWriter
from toolproof.evidence.store import EvidenceStore

__all__ = ["SYNC_INTERVAL", "Durability", "GroupSync", "sync_run"]

SYNC_INTERVAL = 0.05
"""Seconds between two fsyncs of a ``group`` recorder, at most (the power-loss window)."""


class Durability(StrEnum):
    """When recorded events become durable; see the module docstring."""

    COMMIT = "commit"
    GROUP = "group"
    EACH = "each"


class GroupSync:
    """A thread that syncs what a recorder wrote, at most every ``interval`` seconds.

    Args:
        sync: makes the recorder's writes durable (``Recorder.sync_now``); an
            ``OSError`` it raises is kept in :attr:`error`.
        after: called after each batch (the trace's running digest is hashed there).
        interval: seconds between two batches, at most.

    Attributes:
        error: the first error a batch raised, or ``None``.
        syncs: batches done so far.

    """

    def __init__(
        self,
        sync: Callable[[], None],
        after: Callable[[], None],
        interval: float,
    ) -> None:
        self._sync = sync
        self._after = after
        self._interval = interval
        self._cond = threading.Condition()
        self._dirty = False
        self._closing = False
        self.error: OSError | None = None
        self.syncs = 0
        self._thread = threading.Thread(target=self._loop, name="toolproof-group-sync", daemon=True)
        self._thread.start()

    def mark(self) -> None:
        """Ask for a sync batch covering everything written so far.

        A batch already asked for needs no lock: the thread sets ``_dirty`` back only
        when it takes the batch, before it syncs, so a batch that has not started yet
        covers the writes made before this call.
        """
        if self._dirty:
            return
        with self._cond:
            if not self._dirty:  # the thread waits for the first mark only
                self._dirty = True
                self._cond.notify()

    def _loop(self) -> None:
        last = -self._interval
        while True:
            with self._cond:
                while not self._dirty and not self._closing:
                    self._cond.wait()
                if not self._dirty:
                    return
                wait = last + self._interval - time.monotonic()
                if wait > 0:  # stop() cuts the wait short: close() never sits out an interval
                    self._cond.wait_for(lambda: self._closing, timeout=wait)
                self._dirty = False
            try:
                self._sync()
            except OSError as exc:
                self.error = self.error or exc
            self._after()
            self.syncs += 1
            last = time.monotonic()

    def stop(self) -> None:
        """Sync what is left and end the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()


def sync_run(
    trace: TraceWriter,
    store: EvidenceStore,
    *,
    group: bool,
    closed: bool,
) -> None:
    """Make a recording's trace and evidence pack durable.

    ``group`` on Linux (and not ``closed``): one ``syncfs(2)`` of the trace's
    filesystem (it holds the pack too). Otherwise, unless ``closed``: fsync the pack
    (when anything was appended since) and the trace.

    Raises:
        OSError: the sync failed (it names the run directory or the file).

    """
    if group and not closed:
        try:
            if syncfs(trace.fileno):
                return
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(trace.path.parent)) from exc
    if not closed:
        store.sync()
        trace.sync()
