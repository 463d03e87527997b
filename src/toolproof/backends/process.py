"""``ProcessPool``: a warm pool of local worker processes speaking the protocol.

Each worker is ``python -m toolproof.adapters.process_worker --config FILE``: a real process
that built the caller's Toolset from the same ``toolproof.toml`` and runs one call
at a time. Requests and results cross its stdin/stdout pipes as length-framed
canonical JSON (:mod:`toolproof.backends.protocol`); nothing is pickled.

Faults become results, never hangs:

* a call over its timeout: the worker is killed (``SIGKILL``; a blocking body stops
  for real, which a thread cannot do) and replaced, and the call fails with
  ``kind="timeout"``;
* a worker that dies (``os._exit``, a segfault, the OOM killer): the call fails
  with ``kind="worker"``, ``where="worker"``, naming the exit status or signal, and
  the pool starts a replacement;
* a cancelled caller: the worker running its job is killed and replaced.

* a result over ``max_result_bytes``: ``kind="invalid_result"`` naming the limit;
* an idle worker that died: replaced before a call is handed to it.

Every worker lives in a :class:`~toolproof.backends.containment.Cell` (its own
cgroup v2 where the host allows it, else a subreaper tree and an environment tag):
killing a worker kills every process its bodies started, however they detached.
Death is read from a pidfd of the worker, not from the pipe alone.

The pool serves callers on any event loop (it registers the pipe with the running
loop per call). :meth:`ProcessPool.close` ends every worker and what it started;
workers also end, with what they started, when the caller's process dies, even by
``SIGKILL`` (see :func:`toolproof.backends.worker.serve_pipes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import Any, Self

from toolproof.backends.containment import Cell
from toolproof.backends.failures import rule_for
from toolproof.backends.pipes import (
    WorkerHandle,
    describe_exit,
    hello_error,
    read_frame,
    reap,
    terminate_all,
    unread,
    write_all,
)
from toolproof.backends.protocol import (
    MAX_FRAME,
    BackendRequest,
    ProtocolError,
    decode_result,
    encode_request,
    frame,
)
from toolproof.backends.worker import PARENT_ENV, WORKER_ENV
from toolproof.contract.tools import ToolResult
from toolproof.errors import BackendError

__all__ = ["WORKER_MODULE", "ProcessPool", "describe_exit"]

WORKER_MODULE = "toolproof.adapters.process_worker"
"""The module a worker process runs (``python -m``): it builds the Toolset and serves."""


_UNSTARTED_RETRIES = 2
"""Fresh workers a call is offered to when the one it got was dead before it took it."""


class ProcessPool:
    """A warm pool of worker processes for one composition root (a ``Backend``).

    Args:
        config_path: the ``toolproof.toml`` every worker builds its Toolset from.
        workers: the number of worker processes (at least 1).
        start_timeout: seconds a worker may take to build its Toolset and say hello.
        python: the interpreter to run workers with (default: this one).
        max_result_bytes: the largest result (bytes of canonical JSON) a worker sends
            back; a larger one is an ``invalid_result`` failure naming the limit
            (at most :data:`~toolproof.backends.protocol.MAX_FRAME`, 256 MiB).
        use_cgroup: contain each worker in a cgroup v2 of its own where the host
            allows it (False: the subreaper tree and tag only; see
            :mod:`toolproof.backends.containment`).

    Raises:
        BackendError: (on use) the pool is closed, or runs inside a toolproof worker.

    """

    def __init__(
        self,
        config_path: str | Path,
        *,
        workers: int = 2,
        start_timeout: float = 30.0,
        python: str | None = None,
        max_result_bytes: int = MAX_FRAME,
        use_cgroup: bool = True,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        if not 1 <= max_result_bytes <= MAX_FRAME:
            raise ValueError(
                f"max_result_bytes must be between 1 and {MAX_FRAME}, not {max_result_bytes}"
            )
        self.max_result_bytes = max_result_bytes
        self.use_cgroup = use_cgroup
        self.config_path = Path(config_path).resolve()
        self.size = workers
        self.start_timeout = start_timeout
        self.python = python or sys.executable
        self._lock = threading.Lock()
        self._all: set[WorkerHandle] = set()
        self._idle: list[WorkerHandle] = []
        self._waiters: deque[asyncio.Future[WorkerHandle]] = deque()
        self._closed = False
        self._owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, terminate_all, self._all)

    # -- workers ------------------------------------------------------------------

    def pids(self) -> list[int]:
        """The process ids of the live workers, sorted."""
        with self._lock:
            return sorted(worker.pid for worker in self._all)

    def _spawn(self) -> WorkerHandle:
        """Start one worker process; it builds its Toolset while the caller goes on.

        Its hello frame is read by the first call that uses it (:meth:`_greet`), so no
        task outlives the event loop that started the worker.
        """
        cell = self._new_cell()
        command = [self.python, "-m", WORKER_MODULE, "--config", str(self.config_path)]
        if self.max_result_bytes != MAX_FRAME:
            command += ["--max-result-bytes", str(self.max_result_bytes)]
        command, env, fds = self._launch(cell, command)
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            pass_fds=fds,
            start_new_session=True,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        cell.enter(proc.pid)  # Python's start-up forks nothing: the worker is still alone
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd: death is read from end of file only
            pidfd = -1
        worker = WorkerHandle(
            proc, os.dup(proc.stdout.fileno()), os.dup(proc.stdin.fileno()), pidfd, cell
        )
        proc.stdin.close()
        proc.stdout.close()
        os.set_blocking(worker.rfd, False)
        with self._lock:
            self._all.add(worker)
        return worker

    def _new_cell(self) -> Cell:
        """The container of a new worker (a subclass may add to it)."""
        return Cell(use_cgroup=self.use_cgroup)

    def _launch(
        self, cell: Cell, command: list[str]
    ) -> tuple[list[str], dict[str, str], tuple[int, ...]]:
        """The command, environment and inherited fds that start ``command`` in ``cell``."""
        env = dict(os.environ)
        env.pop(WORKER_ENV, None)
        env.update(cell.environment())
        env[PARENT_ENV] = str(os.getpid())
        return command, env, ()

    def _broken(self, worker: WorkerHandle, variant: str) -> ToolResult | None:
        """The failure replacing a finished call's result when its cell's limit stopped it."""
        return None

    async def _greet(self, worker: WorkerHandle) -> str | None:
        """Read the worker's hello; return why it cannot serve, or ``None``."""
        try:
            data = await read_frame(worker, self.start_timeout)
        except TimeoutError:
            return f"worker process {worker.pid} did not start within {self.start_timeout} s"
        except ProtocolError as exc:
            return exc.message
        if data is None:
            await reap(worker, 2.0)
            status = describe_exit(worker.proc.returncode)
            return f"worker process {worker.pid} ended before saying hello ({status})"
        error = hello_error(data)
        if error is None:
            worker.greeted = True
        return error

    def _discard(self, worker: WorkerHandle) -> None:
        """Kill ``worker`` and everything its bodies started; reap it; close its fds."""
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            if worker in self._idle:
                self._idle.remove(worker)
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
            worker.proc.wait(timeout=5)
        worker.sweep()
        worker.close_fds()

    def _replace(self, worker: WorkerHandle) -> None:
        """Kill ``worker`` and start its replacement (the pool stays warm)."""
        self._discard(worker)
        with self._lock:
            if self._closed:
                return
        self._release(self._spawn())

    def _release(self, worker: WorkerHandle) -> None:
        worker.busy = False
        with self._lock:
            retire = self._closed or worker.retired
            waiter = None
            if not retire:
                while self._waiters:
                    candidate = self._waiters.popleft()
                    if not candidate.done():
                        waiter = candidate
                        worker.busy = True
                        break
                else:
                    self._idle.append(worker)
                    return
        if retire:
            self._discard(worker)
        elif waiter is not None:
            _settle(waiter, result=worker, fallback=self._release)

    async def _acquire(self) -> WorkerHandle:
        if self._owner_pid != os.getpid():
            raise BackendError("process pool was created in another process (after fork)")
        if os.environ.get(WORKER_ENV) == "1":
            raise BackendError(
                "the process backend cannot start inside a toolproof worker "
                "(rule: a relocating backend runs on the caller's side)"
            )
        dead: list[WorkerHandle] = []
        worker: WorkerHandle | None = None
        waiter: asyncio.Future[WorkerHandle] | None = None
        with self._lock:
            if self._closed:
                raise BackendError(f"process pool for {self.config_path} is closed")
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.exited():
                    worker = candidate
                    worker.busy = True
                    break
                # An idle worker that died is replaced, never handed a call.
                self._all.discard(candidate)
                dead.append(candidate)
            if worker is None:
                missing = self.size - len(self._all)
                if missing <= 0:
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
        for gone in dead:
            gone.sweep()
            gone.close_fds()
        if worker is not None:
            return worker
        if waiter is None:
            # Warm the whole pool at once; this call takes the first new worker.
            mine = self._spawn()
            mine.busy = True
            for _ in range(missing - 1):
                self._release(self._spawn())
            return mine
        try:
            return await waiter
        except asyncio.CancelledError:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())
            raise

    async def start(self) -> None:
        """Start every worker now and wait until one has built its Toolset.

        Raises:
            BackendError: a worker could not build the Toolset; the message is its error.

        """
        worker = await self._acquire()
        try:
            error = None if worker.greeted else await self._greet(worker)
        except BaseException:
            self._discard(worker)
            raise
        if error is not None:
            self._discard(worker)
            raise BackendError(f"process backend for {self.config_path}: {error}")
        self._release(worker)

    # -- calls --------------------------------------------------------------------

    async def submit(self, request: BackendRequest) -> ToolResult:
        """Run ``request.variant`` in a worker; return its result or a normalized failure.

        Args:
            request: the tool name to run in the worker, arguments already validated
                against that tool's schema, the caller's descriptor digest of it, and
                ``timeout``: seconds the body may run (``None``: no limit); over it,
                the worker is killed and the call fails with ``kind="timeout"``.

        Returns:
            The worker's :class:`ToolResult`, or a failure with ``where="worker"``
            (``timeout``, ``worker``) or ``where="backend"`` (pool closed, start
            failed).

        Raises:
            asyncio.CancelledError: the caller was cancelled; its worker was killed.

        """
        variant, timeout = request.variant, request.timeout
        message = frame(encode_request(variant, request.arguments, request.descriptor))
        # A worker found dead before it took the whole request (killed while idle,
        # before the pool noticed) never ran it: the call goes to a fresh worker.
        for attempt in range(_UNSTARTED_RETRIES + 1):
            try:
                worker = await self._acquire()
            except BackendError as exc:
                return ToolResult.fail("backend", exc.message, where="backend", retryable=True)
            if not worker.greeted:
                try:
                    error = await self._greet(worker)
                except BaseException:
                    self._discard(worker)
                    raise
                if error is not None:
                    self._discard(worker)
                    return ToolResult.fail(
                        "backend",
                        f"process backend for {self.config_path}: {error}",
                        where="worker",
                        retryable=False,
                    )
            started = time.monotonic()
            try:
                delivered = write_all(worker.wfd, message)
                data = await read_frame(worker, timeout)
            except TimeoutError:
                self._replace(worker)
                return ToolResult.fail(
                    "timeout",
                    f"tool {variant!r} did not finish within {timeout} s: worker process "
                    f"{worker.pid} was killed and replaced",
                    where="worker",
                    retryable=True,
                    detail={"timeout_s": timeout, "pid": worker.pid},
                )
            except ProtocolError as exc:
                self._replace(worker)
                rule = rule_for(exc)
                assert rule is not None  # the one table maps every engine error
                return ToolResult.fail(
                    rule.kind,
                    f"worker process {worker.pid} broke the protocol while running tool "
                    f"{variant!r}: {exc.message}; the pool replaced it",
                    where=rule.where,
                    retryable=rule.retryable,
                    detail={"pid": worker.pid},
                )
            except BaseException:
                # Cancelled (or an internal error): the job must not keep running.
                self._replace(worker)
                raise
            unstarted = data is None and (not delivered or unread(worker.wfd) > 0)
            if not unstarted or attempt == _UNSTARTED_RETRIES:
                break
            await reap(worker, 2.0)
            self._replace(worker)
        if data is None or worker.retired:
            await reap(worker, 2.0)
            status = describe_exit(worker.proc.returncode)
            elapsed = time.monotonic() - started
            broken = self._broken(worker, variant)
            self._replace(worker)
            return broken or ToolResult.fail(
                "worker",
                f"worker process {worker.pid} died while running tool {variant!r} "
                f"({status}, after {elapsed:.3f} s); the pool replaced it",
                where="worker",
                retryable=True,
                detail={"pid": worker.pid, "exit": status},
            )
        broken = self._broken(worker, variant)
        self._release(worker)
        if broken is not None:
            return broken
        try:
            return decode_result(data)
        except ProtocolError as exc:
            return ToolResult.fail("backend", exc.message, where="worker")

    # -- shutdown -----------------------------------------------------------------

    def close(self, grace: float = 2.0) -> None:
        """End every worker and wait for it; idempotent.

        Idle workers get end-of-file and exit; a worker still running a body after
        ``grace`` seconds is killed. Waiting callers fail with ``kind="backend"``.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiters, self._waiters = list(self._waiters), deque()
            workers = list(self._all)
            self._idle.clear()
        closed = BackendError(f"process pool for {self.config_path} is closed")
        for waiter in waiters:
            _settle(waiter, exception=closed)
        for worker in workers:
            worker.retired = True
            if worker.busy:
                worker.kill()
            else:
                os.close(worker.wfd)
                worker.wfd = -1
        deadline = time.monotonic() + grace
        for worker in workers:
            try:
                worker.proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.proc.wait()
            worker.sweep()  # what a body left running (a daemon child) ends with the pool
            if not worker.busy:
                worker.close_fds()
                with self._lock:
                    self._all.discard(worker)

    async def aclose(self, grace: float = 2.0) -> None:
        """:meth:`close` without blocking the event loop."""
        await asyncio.to_thread(self.close, grace)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._all)} workers"
        return f"ProcessPool({str(self.config_path)!r}, {state})"


def _settle(
    waiter: asyncio.Future[WorkerHandle],
    *,
    result: WorkerHandle | None = None,
    exception: BaseException | None = None,
    fallback: Any = None,
) -> None:
    """Resolve ``waiter`` on its own loop, from any thread."""

    def resolve() -> None:
        if waiter.done():
            if result is not None and fallback is not None:
                fallback(result)
            return
        if exception is not None:
            waiter.set_exception(exception)
        elif result is not None:
            waiter.set_result(result)

    loop = waiter.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        resolve()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(resolve)
    elif result is not None and fallback is not None:
        fallback(result)
