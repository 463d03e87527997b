"""The sandbox's egress allow-list: listeners inside the namespace, served from outside.

A sandboxed worker has a network namespace of its own that holds only ``lo``: nothing
it opens can leave. For each ``allow`` entry (``host:port``) the worker, before it
builds its Toolset, binds a TCP listener **inside** that namespace at the address the
body will connect to — the entry's own address for a loopback entry
(``127.0.0.1:8031``), or a loopback alias (``127.64.0.N``) that the sandbox's
``/etc/hosts`` gives the entry's host name (``api.example.com:443``) — and sends
the listening sockets (``SCM_RIGHTS``) over a socket pair the pool gave it, then closes
its own copies. The pool's :class:`EgressProxy`, a thread of the **caller's** process
(outside the sandbox, in the caller's network), accepts on them and connects each
connection to its entry's real destination, then copies bytes both ways.

So the allow-list is enforced outside the body's reach: a listener leads to one fixed
destination, the body holds no socket that reaches anything else (AF_UNIX sockets
cannot be created at all in the sandbox, by a seccomp filter), and an address nobody
listens on inside the namespace is refused by the kernel at once. A destination that
does not answer closes the body's connection after :data:`CONNECT_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from dataclasses import dataclass, field

__all__ = [
    "CONNECT_TIMEOUT",
    "EgressLink",
    "EgressProxy",
    "inside_addresses",
    "listener_targets",
]

CONNECT_TIMEOUT = 10.0
"""Seconds the proxy waits for an allowed destination to accept a connection."""

_ALIAS_NET = "127.64.0."


def inside_addresses(allow: tuple[str, ...]) -> dict[str, str]:
    """``host:port`` entry -> the ``address:port`` its listener takes inside the namespace.

    A loopback IPv4 entry keeps its address; ``localhost`` is ``127.0.0.1``; a host
    name gets ``127.64.0.N`` (N from 1, in the order of the sorted entries; one alias
    per name).

    Raises:
        ValueError: more than 254 host names.

    """
    aliases: dict[str, str] = {}
    inside: dict[str, str] = {}
    for entry in allow:
        host, port = entry.rsplit(":", 1)
        name = host.lower()
        try:
            address = str(ipaddress.IPv4Address(name))
        except ValueError:
            if name == "localhost":
                address = "127.0.0.1"
            else:
                if name not in aliases:
                    if len(aliases) >= 254:
                        raise ValueError("at most 254 host names in allow") from None
                    aliases[name] = f"{_ALIAS_NET}{len(aliases) + 1}"
                address = aliases[name]
        inside[entry] = f"{address}:{port}"
    return inside


def listener_targets(inside: dict[str, str]) -> list[tuple[str, int]]:
    """The destination of each listener, in the order the worker binds and sends them.

    A worker binds one listener per distinct inside address (sorted), so two entries
    that meet there (``localhost:8031`` and ``127.0.0.1:8031``) share one; its
    destination is the first of them, sorted.
    """
    first: dict[str, str] = {}
    for entry in sorted(inside):
        first.setdefault(inside[entry], entry)
    return [(first[at].rsplit(":", 1)[0], int(first[at].rsplit(":", 1)[1])) for at in sorted(first)]


@dataclass(eq=False)
class EgressLink:
    """What the proxy serves for one worker: its listeners and open connections."""

    servers: list[asyncio.Server] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    closed: bool = False


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


class EgressProxy:
    """Serves the listeners of sandboxed workers from a thread of the caller's process.

    Args:
        connect_timeout: seconds to wait for a destination to accept a connection.

    """

    def __init__(self, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="toolproof-egress", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def attach(self, control: socket.socket, targets: list[tuple[str, int]]) -> EgressLink:
        """Serve the listeners a worker will send on ``control``, in ``targets``' order.

        Args:
            control: the pool's end of the worker's socket pair (closed here once read).
            targets: ``(host, port)`` of each listener's destination.

        """
        link = EgressLink()
        asyncio.run_coroutine_threadsafe(self._serve(link, control, targets), self._running())
        return link

    async def _serve(
        self, link: EgressLink, control: socket.socket, targets: list[tuple[str, int]]
    ) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        control.setblocking(False)

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(control.fileno(), readable)
        try:
            await ready
            _, fds, _, _ = socket.recv_fds(control, 64, len(targets))
        except OSError:
            fds = []
        finally:
            loop.remove_reader(control.fileno())
            control.close()
        for fd, target in zip(fds, targets, strict=False):
            listener = socket.socket(fileno=fd)
            if link.closed:
                listener.close()
                continue

            async def relay(
                reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter,
                target: tuple[str, int] = target,
            ) -> None:
                task = asyncio.current_task()
                assert task is not None
                link.tasks.add(task)
                try:
                    await self._relay(reader, writer, target)
                finally:
                    link.tasks.discard(task)

            link.servers.append(await asyncio.start_server(relay, sock=listener))

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: tuple[str, int]
    ) -> None:
        try:
            far_reader, far_writer = await asyncio.wait_for(
                asyncio.open_connection(*target), self.connect_timeout
            )
        except (OSError, TimeoutError):
            writer.close()
            return
        try:
            await asyncio.gather(_pump(reader, far_writer), _pump(far_reader, writer))
        finally:
            writer.close()
            far_writer.close()

    def detach(self, link: EgressLink) -> None:
        """Stop serving ``link``: close its listeners and its open connections."""
        link.closed = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def close() -> None:
            for server in link.servers:
                server.close()
            for task in list(link.tasks):
                task.cancel()

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(close)

    def close(self) -> None:
        """Stop the proxy's thread (every link closes with it); idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2.0)
        if not thread.is_alive():
            loop.close()
