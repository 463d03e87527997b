"""The worker side: build the Toolset from the composition root and serve requests.

:class:`WorkerRuntime` holds the Toolset a worker built from the same
``toolproof.toml`` as its caller and answers protocol requests (bytes in, bytes
out). :class:`LoopThread` runs one runtime on an event loop in a daemon thread, for
engines whose tasks are synchronous (Celery). :func:`serve_pipes` is the body of a
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
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolproof.backends.protocol import (
    PROTOCOL_VERSION,
    FrameReader,
    ProtocolError,
    decode_request,
    encode_result,
    frame,
    serve_request,
)
from toolproof.contract.tools import ToolResult
from toolproof.errors import ToolproofError
from toolproof.identity import canonical_json
from toolproof.tools.toolset import Toolset

__all__ = ["WORKER_ENV", "Builder", "LoopThread", "WorkerRuntime", "serve_pipes"]

WORKER_ENV = "TOOLPROOF_WORKER"
"""Set to ``"1"`` in every worker process; a relocating backend refuses to start there."""

Builder = Callable[[Path], Awaitable[Toolset]]
"""``async (config_path) -> sealed Toolset``: how a worker builds its Toolset."""


class WorkerRuntime:
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
            raise RuntimeError("WorkerRuntime.start() has not run")
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


class LoopThread:
    """A :class:`WorkerRuntime` on its own event loop in a daemon thread.

    Synchronous task code calls :meth:`handle` from any thread; the Toolset lives on
    one loop for the life of the process.

    Args:
        config_path: the ``toolproof.toml``.
        build: builds the Toolset from ``config_path``.

    Raises:
        ConfigError: (from the constructor) the composition root is invalid.

    """

    def __init__(self, config_path: str | Path, build: Builder) -> None:
        self.runtime = WorkerRuntime(config_path, build)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="toolproof-worker-loop", daemon=True
        )
        self._thread.start()
        try:
            self._submit(self.runtime.start()).result()
        except BaseException:
            self.close()
            raise

    def _submit(self, coro: object) -> concurrent.futures.Future[object]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def handle(self, data: bytes | str) -> bytes:
        """Answer one request (blocks the calling thread until the variant returns)."""
        result = self._submit(self.runtime.handle(data)).result()
        assert isinstance(result, bytes)
        return result

    def close(self) -> None:
        """Close the Toolset and stop the loop; idempotent."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            try:
                self._submit(self.runtime.aclose()).result(timeout=10)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
        self._loop.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _watch_parent(parent: int) -> None:
    # The pipe closing on parent death ends the worker; this catches the rare case of
    # the pipe's write end leaking into another process.
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def _read_frames(rfd: int, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[bytes]) -> None:
    reader = FrameReader()
    while True:
        try:
            chunk = os.read(rfd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            # The caller closed the pipe (pool shutdown) or died: nobody will read a
            # result any more, so do not wait for a running body.
            os._exit(0)
        try:
            frames = reader.feed(chunk)
        except ProtocolError:
            os._exit(3)
        for item in frames:
            loop.call_soon_threadsafe(inbox.put_nowait, item)


async def _serve(config: Path, build: Builder, rfd: int, wfd: int) -> int:
    runtime = WorkerRuntime(config, build)
    try:
        toolset = await runtime.start()
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
    threading.Thread(
        target=_read_frames, args=(rfd, loop, inbox), name="toolproof-worker-reader", daemon=True
    ).start()
    try:
        while True:
            request = await inbox.get()
            _write_all(wfd, frame(await runtime.handle(request)))
    finally:
        await runtime.aclose()


def serve_pipes(config: Path, build: Builder) -> int:
    """Run a process-pool worker on its stdin/stdout pipes until the caller closes them.

    Args:
        config: the ``toolproof.toml`` to build the Toolset from.
        build: builds the Toolset.

    Returns:
        1 when the composition root could not be built (the error travels to the
        caller in the hello frame). When the caller closes the pipe or dies, the
        process exits with status 0 at once, even in the middle of a body.

    """
    os.environ[WORKER_ENV] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    threading.Thread(
        target=_watch_parent, args=(os.getppid(),), name="toolproof-parent-watch", daemon=True
    ).start()
    return asyncio.run(_serve(config, build, rfd, wfd))
