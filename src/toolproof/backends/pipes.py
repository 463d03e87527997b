"""One worker process of the pool and the pipe I/O that talks to it.

A :class:`WorkerHandle` holds the process and the caller's ends of its pipes;
:func:`read_frame` waits for the next length-framed message on the running event
loop, without a thread; :func:`describe_exit` says how a worker ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field

from toolproof.backends.containment import Cell
from toolproof.backends.protocol import FrameReader, ProtocolError

__all__ = [
    "WorkerHandle",
    "describe_exit",
    "hello_error",
    "read_frame",
    "reap",
    "terminate_all",
    "unread",
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
    """A worker process, the caller's ends of its pipes, and its state in the pool.

    Attributes:
        proc: the worker process.
        rfd: the caller's (non-blocking) read end of the worker's answers.
        wfd: the caller's write end of the worker's requests.
        pidfd: a pidfd of the worker, readable once it ends (-1 where unsupported).
        cell: the container of the worker and its descendants
            (:class:`~toolproof.backends.containment.Cell`).

    """

    proc: subprocess.Popen[bytes]
    rfd: int
    wfd: int
    pidfd: int = -1
    cell: Cell | None = None
    reader: FrameReader = field(default_factory=FrameReader)
    busy: bool = False
    greeted: bool = False
    retired: bool = False

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def exited(self) -> bool:
        """Whether the worker has ended (reaps it if so; never blocks)."""
        return self.proc.poll() is not None

    def kill(self) -> None:
        """Kill the worker and every process its bodies started (its :class:`Cell`).

        The worker's tree is searched only while it has not been reaped (its pid
        cannot have been reused), and the worker is signalled through its pidfd; after
        that, its cell still finds what it left.
        """
        root = self.pid if self.proc.returncode is None else None
        if self.cell is not None:
            self.cell.kill(root, pidfd=self.pidfd)
        elif root is not None:
            with contextlib.suppress(ProcessLookupError):
                if self.pidfd >= 0:  # the worker itself, even if its pid were reused
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                else:
                    self.proc.kill()

    def sweep(self) -> None:
        """Kill what an ended worker left behind (every other process of its cell)."""
        if self.cell is not None:
            self.cell.kill(None)

    def close_fds(self) -> None:
        """Close the caller's ends of both pipes and the pidfd, remove the cell; idempotent."""
        for fd in (self.rfd, self.wfd, self.pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.rfd = self.wfd = self.pidfd = -1
        if self.cell is not None:
            self.cell.close()


def terminate_all(workers: set[WorkerHandle]) -> None:
    """Kill and reap every worker and what it started (the pool's finalizer, also at exit)."""
    for worker in list(workers):
        worker.kill()
    for worker in list(workers):
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
            worker.proc.wait(timeout=5)
        worker.sweep()
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


def write_all(fd: int, data: bytes) -> bool:
    """Write every byte of ``data`` to the pipe ``fd``.

    Returns:
        ``True`` when every byte went into the pipe; ``False`` when its reader had
        closed it (``EPIPE``: the worker died before it could read the whole frame,
        so it never started the request). A dead worker is otherwise left to the
        reader, :func:`read_frame`.

    """
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BrokenPipeError:
            return False
        view = view[written:]
    return True


def unread(fd: int) -> int:
    """How many bytes written to the pipe ``fd`` its reader has not taken (``FIONREAD``).

    Works on the write end too, and after the reader died: the pipe's buffer lives
    as long as one end is open (pipe(7)). A worker that died with bytes of its
    request still unread had not received the whole frame, so it never ran it.

    Returns:
        The byte count; 0 when the ioctl is not supported for ``fd``.

    """
    try:
        answer = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    count: int = struct.unpack("i", answer)[0]
    return count


async def read_frame(worker: WorkerHandle, timeout: float | None) -> bytes | None:
    """Wait for the worker's next frame; ``None`` when the worker died.

    Death is read from the process itself (its pidfd becomes readable), not only
    from end of file on the pipe: a process the body forked may still hold the
    pipe's write end. Whatever the worker wrote before it ended is still read.

    Raises:
        TimeoutError: nothing complete arrived within ``timeout`` seconds.
        ProtocolError: the worker sent a malformed frame.

    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes | None] = loop.create_future()

    def pull() -> bool:
        """Read what is there; True when the future got its outcome."""
        while True:
            try:
                chunk = os.read(worker.rfd, 1 << 16)
            except BlockingIOError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                done.set_result(None)
                return True
            try:
                frames = worker.reader.feed(chunk)
            except ProtocolError as exc:
                done.set_exception(exc)
                return True
            if frames:
                done.set_result(frames[0])
                return True

    def readable() -> None:
        if not done.done():
            pull()

    def ended() -> None:
        if not done.done() and not pull():
            done.set_result(None)

    loop.add_reader(worker.rfd, readable)
    if worker.pidfd >= 0:
        loop.add_reader(worker.pidfd, ended)
    try:
        async with asyncio.timeout(timeout):
            return await done
    finally:
        loop.remove_reader(worker.rfd)
        if worker.pidfd >= 0:
            loop.remove_reader(worker.pidfd)


async def reap(worker: WorkerHandle, timeout: float) -> None:
    """Wait (polling, without blocking the loop) until the worker has exited."""
    deadline = time.monotonic() + timeout
    while worker.proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
