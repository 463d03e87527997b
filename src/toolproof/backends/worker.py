"""The worker side: build the Toolset from the composition root and serve requests.

:class:`WorkerServer` holds the Toolset a worker built from the same
``toolproof.toml`` as its caller and answers protocol requests (bytes in, bytes
out). :class:`SyncWorkerServer` runs one on a private event loop for engines whose
tasks are synchronous (Celery). :func:`serve_pipes` is the body of a
process-pool worker (``python -m toolproof.adapters.process_worker --config FILE``,
started by :class:`toolproof.backends.process.ProcessPool`): it speaks length-framed
protocol messages on the pipes it got as stdin and stdout, and moves fd 1 to
stderr first so a body that prints cannot corrupt the channel.

The Toolset is built by a :data:`Builder` the entry point passes in (the
composition root, ``toolproof.config.build_toolset``, sits above this layer).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import select
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, Protocol, TypeVar, TypeVarTuple, Unpack

from toolproof.backends.containment import (
    CGROUP_ENV,
    TAG_ENV,
    cgroup_kill,
    join_cell,
    kill_tree,
    parent_pidfd,
    set_parent_death_signal,
    set_subreaper,
)
from toolproof.backends.protocol import (
    MAX_FRAME,
    PROTOCOL_VERSION,
    FrameReader,
    ProtocolError,
    decode_request,
    encode_result,
    frame,
    serve_request,
)
from toolproof.contract.tools import ToolResult
from toolproof.errors import ToolproofError, UsageError
from toolproof.identity import canonical_json
from toolproof.tools import hooks
from toolproof.tools.toolset import Toolset

__all__ = [
    "PARENT_ENV",
    "WORKER_ENV",
    "Builder",
    "CallGuard",
    "SyncWorkerServer",
    "WorkerLoop",
    "WorkerServer",
    "serve_pipes",
    "worker_loop",
]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

WORKER_ENV = "TOOLPROOF_WORKER"
"""Set to ``"1"`` in every worker process; a relocating backend refuses to start there."""

PARENT_ENV = "TOOLPROOF_WORKER_PARENT"
"""The pid of the process that started a pool worker (the worker dies with it)."""

_PARENT_DEATH_SIGNAL = signal.SIGUSR1
_PRIVATE_FD_MIN = 200

Builder = Callable[[Path], Awaitable[Toolset]]
"""``async (config_path) -> sealed Toolset``: how a worker builds its Toolset."""


class WorkerLoop(asyncio.SelectorEventLoop):
    """The event loop of a worker: work for the default executor runs at once, inline.

    A worker runs one call at a time, so the thread hand-off of
    ``asyncio.to_thread`` (how sync tool bodies run) buys nothing there and costs
    two context switches and a loop wake-up per call. Here ``run_in_executor(None,
    fn, *args)`` calls ``fn`` in the loop's thread and returns a finished future. A
    sync body then blocks the worker's loop while it runs, which is what a worker
    is for: a timeout still stops it, by killing the process. An explicit executor
    is used as usual.
    """

    def run_in_executor(
        self,
        executor: concurrent.futures.Executor | None,
        func: Callable[[Unpack[Ts]], T],
        *args: *Ts,
    ) -> asyncio.Future[T]:
        """Run ``func(*args)`` now when ``executor`` is ``None``; otherwise submit it."""
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future


def worker_loop() -> asyncio.AbstractEventLoop:
    """A new :class:`WorkerLoop`."""
    return WorkerLoop()


class WorkerServer:
    """The Toolset of one composition root, serving relocation requests.

    Args:
        config_path: the ``toolproof.toml`` the caller built its Toolset from.
        build: builds the Toolset from ``config_path``.

    """

    def __init__(self, config_path: str | Path, build: Builder) -> None:
        self.config_path = Path(config_path)
        self._build = build
        self._toolset: Toolset | None = None

    @property
    def toolset(self) -> Toolset:
        """The built Toolset.

        Raises:
            RuntimeError: :meth:`start` has not run.

        """
        if self._toolset is None:
            raise RuntimeError("WorkerServer.start() has not run")
        return self._toolset

    async def start(self) -> Toolset:
        """Build the Toolset (once).

        Raises:
            ConfigError: the composition root is invalid.

        """
        if self._toolset is None:
            self._toolset = await self._build(self.config_path)
        return self._toolset

    async def handle(self, data: bytes | str) -> bytes:
        """Answer one request with the canonical JSON of a :class:`ToolResult`."""
        try:
            request = decode_request(data)
        except ProtocolError as exc:
            return encode_result(ToolResult.fail("backend", exc.message, where="worker"))
        return encode_result(await serve_request(self.toolset, request))

    async def aclose(self) -> None:
        """Close the Toolset (its MCP sessions and other resources)."""
        if self._toolset is not None:
            await self._toolset.aclose()


class SyncWorkerServer:
    """A :class:`WorkerServer` on a private event loop, for synchronous task code.

    Each call runs the loop until the answer is ready, in the calling thread, so a
    task pays no thread hand-off. It belongs to the thread that created it (a Celery
    prefork pool process runs its tasks in its main thread); between calls the loop
    does not run, so the Toolset's background work (an MCP session's reader) waits
    for the next call.

    Args:
        config_path: the ``toolproof.toml``.
        build: builds the Toolset from ``config_path``.

    Raises:
        ConfigError: (from the constructor) the composition root is invalid.

    """

    def __init__(self, config_path: str | Path, build: Builder) -> None:
        self.server = WorkerServer(config_path, build)
        self._owner = threading.get_ident()
        self._loop = worker_loop()
        try:
            self._loop.run_until_complete(self.server.start())
        except BaseException:
            self._loop.close()
            raise

    def handle(self, data: bytes | str) -> bytes:
        """Answer one request (blocks until the variant returns).

        Raises:
            UsageError: called from another thread than the one that created it.

        """
        if threading.get_ident() != self._owner:
            raise UsageError("a SyncWorkerServer is used only by the thread that created it")
        return self._loop.run_until_complete(self.server.handle(data))

    def close(self) -> None:
        """Close the Toolset and the loop; idempotent."""
        if self._loop.is_closed():
            return
        try:
            self._loop.run_until_complete(self.server.aclose())
        finally:
            self._loop.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _end_worker(code: int, *, flush: bool = False) -> NoReturn:
    """Kill every process the bodies started, then end this worker at once.

    The tree and the tag (:func:`kill_tree`) first, which also find what a body running
    as root moved out of the cgroup; then, with a cgroup, one ``cgroup.kill`` ends what
    is inside and this worker together. With
    ``flush`` (the pool closed the pipe: called from the loop, holding no lock of the
    span processor), spans still buffered are exported first (at most 2 s; nothing with
    telemetry off); a signal handler or the parent watch never flushes, so a worker
    whose caller died is never held up by a span export.
    """
    if flush:
        hooks.flush(2.0)
    # The tree and the tag first: they also find what a body running as root moved out
    # of the cgroup; then cgroup.kill ends what is inside, this worker with it.
    kill_tree(os.getpid(), os.environ.get(TAG_ENV))
    cgroup = os.environ.get(CGROUP_ENV)
    if cgroup:
        cgroup_kill(Path(cgroup))
    os._exit(code)


def _watch_parent(parent: int) -> None:
    """End the worker, and everything below it, when the caller's process ends.

    It waits on a pidfd of the caller (no polling); when no pidfd can be had it
    checks :func:`os.getppid` every 0.2 s. Either way it also covers a caller that
    died before the parent-death signal was set.
    """
    fd = parent_pidfd(parent)
    if fd is None:
        _end_worker(0)
    try:
        select.select([fd], [], [])
    except OSError:
        while os.getppid() == parent:
            time.sleep(0.2)
    _end_worker(0)


def _on_parent_death(parent: int) -> Callable[[int, object], None]:
    def handler(signum: int, frame: object) -> None:
        # The signal follows the caller's *thread*: act only if the process is gone.
        if os.getppid() != parent:
            _end_worker(0)

    return handler


def _reader(rfd: int, inbox: asyncio.Queue[bytes]) -> Callable[[], None]:
    """The loop's reader callback for the request pipe (no thread hop per request)."""
    reader = FrameReader()

    def readable() -> None:
        try:
            chunk = os.read(rfd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            # The caller closed the pipe (pool shutdown) or died: nobody will read a
            # result any more, so do not wait for a running body.
            _end_worker(0, flush=True)
        try:
            frames = reader.feed(chunk)
        except ProtocolError:
            _end_worker(3)
        for item in frames:
            inbox.put_nowait(item)

    return readable


def _bounded(answer: bytes, request: bytes, limit: int) -> bytes:
    """``answer``, or an ``invalid_result`` failure naming the limit when it is over it."""
    if len(answer) <= limit:
        return answer
    try:
        variant: object = decode_request(request).variant
    except ProtocolError:
        variant = "?"
    failure = ToolResult.fail(
        "invalid_result",
        f"tool {variant!r} returned {len(answer)} bytes of JSON, over the process backend's "
        f"result limit of {limit} bytes (max_result_bytes)",
        where="output",
        detail={"bytes": len(answer), "limit_bytes": limit},
    )
    return encode_result(failure)


class CallGuard(Protocol):
    """What a worker runs around every call (the sandbox's :class:`SandboxGuard`)."""

    def begin(self) -> None:
        """Before the call."""

    def end(self, request: bytes, answer: bytes) -> bytes:
        """After the call: the answer to send (``answer``, or a failure replacing it)."""


async def _serve(
    config: Path, build: Builder, rfd: int, wfd: int, limit: int, guard: CallGuard | None
) -> int:
    server = WorkerServer(config, build)
    try:
        toolset = await server.start()
    except ToolproofError as exc:
        hello = {"protocol": PROTOCOL_VERSION, "pid": os.getpid(), "error": exc.message}
        _write_all(wfd, frame(canonical_json(hello)))
        return 1
    hello_ok = {
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        "toolset": toolset.descriptor().digest,
    }
    _write_all(wfd, frame(canonical_json(hello_ok)))
    inbox: asyncio.Queue[bytes] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    os.set_blocking(rfd, False)
    loop.add_reader(rfd, _reader(rfd, inbox))
    try:
        while True:
            request = await inbox.get()
            if guard is not None:
                guard.begin()
            answer = await server.handle(request)
            if guard is not None:
                answer = guard.end(request, answer)
            answer = _bounded(answer, request, limit)
            _write_all(wfd, frame(answer))
    finally:
        await server.aclose()


def _private_fd(fd: int) -> int:
    """A close-on-exec duplicate of ``fd`` above the low numbers a body might reuse."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _PRIVATE_FD_MIN)


def serve_pipes(
    config: Path,
    build: Builder,
    *,
    max_result_bytes: int = MAX_FRAME,
    guard: CallGuard | None = None,
) -> int:
    """Run a process-pool worker on its stdin/stdout pipes until the caller closes them.

    Before anything else runs, the worker makes sure nothing it starts can outlive it
    or hide its death (see :mod:`toolproof.backends.containment`): it joins its
    cell's cgroup (where it has one) itself, before it can fork; the protocol pipes
    move to private close-on-exec descriptors that a forked child closes at once
    (``os.register_at_fork``); fds 0 and 1 become ``/dev/null`` and stderr; the
    worker becomes a child subreaper; a parent-death signal and a pidfd watch on the
    caller end it, and every process below it, when the caller dies (even by
    ``SIGKILL``).

    Args:
        config: the ``toolproof.toml`` to build the Toolset from.
        build: builds the Toolset.
        max_result_bytes: the largest answer (bytes of canonical JSON) sent back;
            a larger result becomes an ``invalid_result`` failure naming the limit.
        guard: runs around every call (``begin()``, then ``end(request, answer)``
            gives the answer sent), or ``None``.

    Returns:
        1 when the composition root could not be built (the error travels to the
        caller in the hello frame). When the caller closes the pipe or dies, the
        process kills what its bodies started and exits with status 0 at once, even
        in the middle of a body.

    """
    join_cell()  # even if the pool's move comes late, nothing is forked outside the cell
    os.environ[WORKER_ENV] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())
    set_subreaper()
    signal.signal(_PARENT_DEATH_SIGNAL, _on_parent_death(parent))
    set_parent_death_signal(_PARENT_DEATH_SIGNAL)
    if os.getppid() != parent:  # the caller died before the signal was set
        _end_worker(0)
    rfd, wfd = _private_fd(0), _private_fd(1)

    def close_protocol_fds() -> None:
        for fd in (rfd, wfd):
            with contextlib.suppress(OSError):
                os.close(fd)

    os.register_at_fork(after_in_child=close_protocol_fds)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    threading.Thread(
        target=_watch_parent, args=(parent,), name="toolproof-parent-watch", daemon=True
    ).start()
    with asyncio.Runner(loop_factory=worker_loop) as runner:
        return runner.run(_serve(config, build, rfd, wfd, max_result_bytes, guard))
