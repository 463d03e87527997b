"""The bounded thread pool that runs sync tool bodies, and its refusal when it is stuck.

A sync body runs in a thread, and a thread cannot be stopped: a ``timeout`` wrapper
(or any cancellation) returns to the caller while the body keeps its thread until it
ends by itself. Sync bodies therefore run on an executor of their own with
:data:`SYNC_BODY_THREADS` threads (not the event loop's default executor, which other
code shares). While every thread is taken and at least one of them holds a body whose
caller already stopped waiting, a new call is **refused at once** with a failure that
says so, instead of queueing behind bodies that may never end. Calls queue normally
when the threads are merely busy with calls whose callers still wait. Bodies that must
really stop belong in the ``process`` backend, which kills the worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolproof.contract.tools import ToolResult

__all__ = ["SYNC_BODY_THREADS", "SyncBodies", "sync_bodies"]

SYNC_BODY_THREADS = 16
"""Threads for sync tool bodies in one process (the default :class:`SyncBodies`)."""


class SyncBodies:
    """A bounded executor for sync bodies that refuses calls while abandoned bodies hold it.

    Args:
        threads: the number of threads (at least 1).

    Raises:
        ValueError: ``threads`` is below 1.

    """

    def __init__(self, threads: int = SYNC_BODY_THREADS) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self.threads = threads
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="toolproof-sync-body")
        self._lock = threading.Lock()
        self._running = 0
        self._abandoned = 0

    @property
    def abandoned(self) -> int:
        """Bodies still running whose callers stopped waiting (timed out or cancelled)."""
        return self._abandoned

    def _refusal(self, tool: str) -> ToolResult | None:
        with self._lock:
            if self._running < self.threads or self._abandoned == 0:
                self._running += 1
                return None
            abandoned = self._abandoned
        return ToolResult.fail(
            "unavailable",
            f"tool {tool!r} was refused: all {self.threads} threads for sync tool bodies "
            f"are busy and {abandoned} of them still run bodies whose callers stopped "
            "waiting (a timeout cannot stop a sync body); retry later, or run a body that "
            'must stop on time in the process backend (extensions = [["process"]])',
            where="body",
            retryable=True,
            detail={"threads": self.threads, "abandoned": abandoned},
        )

    async def run(self, tool: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` on a body thread and return its value, or the refusal.

        Args:
            tool: the tool's name (named in the refusal).
            fn: the body with its arguments bound.

        Returns:
            What ``fn`` returned, or a failed :class:`ToolResult` (``kind="unavailable"``)
            when the threads are all held and some by abandoned bodies.

        Raises:
            Exception: what ``fn`` raised.
            asyncio.CancelledError: the caller was cancelled; the body keeps its thread
                (counted as abandoned) until it returns.

        """
        refusal = self._refusal(tool)
        if refusal is not None:
            return refusal
        state = {"done": False, "abandoned": False}

        def call() -> Any:
            try:
                return fn()
            finally:
                with self._lock:
                    state["done"] = True
                    self._running -= 1
                    if state["abandoned"]:
                        self._abandoned -= 1

        # in the caller's context, as asyncio.to_thread: the call's scope (its idempotency
        # key, its channel) reaches the body
        context = contextvars.copy_context()
        future = asyncio.get_running_loop().run_in_executor(self._executor, context.run, call)
        try:
            return await future
        except asyncio.CancelledError:
            with self._lock:
                if not state["done"] and not state["abandoned"]:
                    state["abandoned"] = True
                    self._abandoned += 1
            raise


_DEFAULT = SyncBodies()


def sync_bodies() -> SyncBodies:
    """The process-wide :class:`SyncBodies` every ``Tool.from_function`` sync body uses."""
    return _DEFAULT
