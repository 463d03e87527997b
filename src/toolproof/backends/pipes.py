"""One worker process of the pool and the pipe I/O that talks to it.

A :class:`WorkerHandle` holds the process and the caller's ends of its pipes;
:func:`read_frame` waits for the next length-framed message on the running event
loop, without a thread; :func:`describe_exit` says how a worker ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

from toolproof.backends.protocol import FrameReader, ProtocolError

__all__ = [
    "WorkerHandle",
    "describe_exit",
    "hello_error",
    "read_frame",
    "reap",
    "terminate_all",
    "write_all",
]


def describe_exit(returncode: int | None) -> str:
    """Say how a worker ended: ``exit status 3`` or ``killed by SIGSEGV``."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        note = " (out of memory, or killed by another process)" if name == "SIGKILL" else ""
        return f"killed by {name}{note}"
    return f"exit status {returncode}"


@dataclass(eq=False)
class WorkerHandle:
    """A worker process, the caller's ends of its pipes, and its state in the pool."""

    proc: subprocess.Popen[bytes]
    rfd: int
    wfd: int
    reader: FrameReader = field(default_factory=FrameReader)
    busy: bool = False
    greeted: bool = False
    retired: bool = False

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def kill(self) -> None:
        """Send ``SIGKILL`` unless the process has already ended."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def close_fds(self) -> None:
        """Close the caller's ends of both pipes; idempotent."""
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.rfd = self.wfd = -1


def terminate_all(workers: set[WorkerHandle]) -> None:
    """Kill and reap every worker (the pool's finalizer, also run at interpreter exit)."""
    for worker in list(workers):
        worker.kill()
    for worker in list(workers):
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
            worker.proc.wait(timeout=5)
        worker.close_fds()
    workers.clear()


def hello_error(data: bytes) -> str | None:
    """Why a worker's hello frame says it cannot serve, or ``None`` when it can."""
    try:
        hello = json.loads(data)
    except ValueError:
        return "worker hello is not JSON"
    if not isinstance(hello, dict):
        return "worker hello is not a JSON object"
    error = hello.get("error")
    return None if error is None else f"worker could not build the Toolset: {error}"


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``; a closed pipe (dead worker) is left to the reader."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BrokenPipeError:
            return  # the worker died; the read side reports it
        view = view[written:]


async def read_frame(worker: WorkerHandle, timeout: float | None) -> bytes | None:
    """Wait for the worker's next frame; ``None`` at end of file (the worker died).

    Raises:
        TimeoutError: nothing complete arrived within ``timeout`` seconds.
        ProtocolError: the worker sent a malformed frame.

    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes | None] = loop.create_future()

    def readable() -> None:
        if done.done():
            return
        try:
            chunk = os.read(worker.rfd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            done.set_result(None)
            return
        try:
            frames = worker.reader.feed(chunk)
        except ProtocolError as exc:
            done.set_exception(exc)
            return
        if frames:
            done.set_result(frames[0])

    loop.add_reader(worker.rfd, readable)
    try:
        async with asyncio.timeout(timeout):
            return await done
    finally:
        loop.remove_reader(worker.rfd)


async def reap(worker: WorkerHandle, timeout: float) -> None:
    """Wait (polling, without blocking the loop) until the worker has exited."""
    deadline = time.monotonic() + timeout
    while worker.proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
