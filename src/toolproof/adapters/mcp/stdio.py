"""``toolproof serve`` over stdio: the claimed stdin/stdout, and a bound on each message.

:class:`StdioWire` claims the process's stdin and stdout for the protocol before any
user code runs. :func:`serve_stdio` reads the client's messages with
:class:`BoundedLines`: one JSON-RPC message is one line, and a line longer than the
limit (``[serve] max_message_bytes``, 32 MiB by default) is never held in memory — it is
discarded as it arrives, and the client is answered at once with the JSON-RPC error
``-32600`` (Invalid Request) with ``id: null`` (JSON-RPC 2.0, section 5: the id of a
request that cannot be read is null), naming the limit. The server keeps serving the
next message.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from toolproof.contract.bounds import STDIO_MESSAGE_BYTES, limit_note

__all__ = [
    "INVALID_REQUEST",
    "READ_CHUNK_BYTES",
    "BoundedLines",
    "LockedWriter",
    "StdioWire",
    "oversize_error",
    "serve_stdio",
]

logger = logging.getLogger("toolproof.mcp")

INVALID_REQUEST = -32600
"""JSON-RPC 2.0: the message is not a valid request (here: longer than the limit)."""
READ_CHUNK_BYTES = 1 << 16
"""Bytes read from stdin at a time (64 KiB)."""


def oversize_error(limit: int) -> dict[str, Any]:
    """The JSON-RPC error answering a message longer than ``limit`` bytes (``id`` null)."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": INVALID_REQUEST,
            "message": (
                f"message refused: longer than the stdio limit of {limit} bytes "
                f"({limit_note(limit, '[serve] max_message_bytes')}); it was discarded unread"
            ),
            "data": {"limit_bytes": limit},
        },
    }


class BoundedLines:
    """The lines of a binary file descriptor, as text, each at most ``limit`` bytes.

    An async iterator of ``str`` (UTF-8, undecodable bytes replaced, the newline
    removed), as ``mcp.server.stdio.stdio_server`` reads its ``stdin``. Reads
    :data:`READ_CHUNK_BYTES` at a time in a worker thread; memory stays below
    ``limit`` plus one chunk whatever the client sends. A line longer than ``limit``
    is dropped as it arrives (up to its newline) and ``on_oversize()`` is awaited once
    for it; iteration goes on with the next line.

    Args:
        fd: the descriptor to read (not closed here).
        limit: the longest line, in bytes, without its newline.
        on_oversize: awaited once per line over ``limit``.

    """

    def __init__(self, fd: int, limit: int, on_oversize: Callable[[], Awaitable[None]]) -> None:
        self._fd = fd
        self._limit = limit
        self._on_oversize = on_oversize
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline
        self._discarding = False  # inside a line over the limit
        self._eof = False

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            cut = self._buffer.find(b"\n", self._scanned)
            if cut >= 0:
                line = bytes(self._buffer[:cut])
                del self._buffer[: cut + 1]
                self._scanned = 0
                if self._discarding:  # the end of a line already refused
                    self._discarding = False
                    continue
                if len(line) > self._limit:
                    await self._on_oversize()
                    continue
                return line.decode("utf-8", errors="replace")
            self._scanned = len(self._buffer)
            if len(self._buffer) > self._limit:
                self._buffer.clear()
                self._scanned = 0
                if not self._discarding:
                    self._discarding = True
                    await self._on_oversize()
            if self._eof:
                if self._buffer and not self._discarding:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            chunk = await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK_BYTES)
            if not chunk:
                self._eof = True
            elif self._discarding and b"\n" not in chunk:
                continue  # the refused line goes on: nothing of it is kept
            else:
                self._buffer += chunk


class LockedWriter:
    """A text stream whose ``write`` and ``flush`` calls never interleave.

    The SDK writes one whole line per ``write``; the oversize answer is written by
    another task, so both go through one lock.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        """Write ``text`` (a whole line) under the lock."""
        async with self._lock:
            await self._inner.write(text)

    async def flush(self) -> None:
        """Flush under the lock."""
        async with self._lock:
            await self._inner.flush()

    async def write_line(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message and flush it, as one unit."""
        async with self._lock:
            await self._inner.write(json.dumps(message, separators=(",", ":")) + "\n")
            await self._inner.flush()


class StdioWire:
    """The process's stdin and stdout, claimed for the MCP protocol alone.

    Claiming moves the protocol onto private descriptors (duplicates above 2, closed
    on exec) and points fd 0 at the null device and fd 1 at stderr. From then on
    whatever else writes to "stdout" — ``print`` in a tool module at import or in a
    tool body, ``os.write(1, ...)``, a C extension, a child process inheriting fd 1 —
    lands on stderr, never on the JSON-RPC stream, and nothing else can read the
    client's requests. Claim it **before** loading the Toolset (imports run user
    code); :meth:`release` puts fds 0 and 1 back.

    Raises:
        OSError: (on construction) the descriptors cannot be duplicated.

    """

    def __init__(self) -> None:
        sys.stdout.flush()
        self.stdin_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self.stdout_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
        self._released = False

    def streams(self) -> tuple[Any, Any]:
        """The protocol's text streams (UTF-8), as ``stdio_server(stdin, stdout)`` takes them."""
        reader = io.TextIOWrapper(
            os.fdopen(self.stdin_fd, "rb", closefd=False), encoding="utf-8", errors="replace"
        )
        return anyio.wrap_file(reader), self.writer()

    def writer(self) -> Any:
        """The protocol's stdout as an async UTF-8 text stream."""
        writer = io.TextIOWrapper(
            os.fdopen(self.stdout_fd, "wb", closefd=False), encoding="utf-8", newline="\n"
        )
        return anyio.wrap_file(writer)

    def release(self) -> None:
        """Point fds 0 and 1 back at the protocol's stdin and stdout; idempotent."""
        if self._released:
            return
        self._released = True
        sys.stdout.flush()
        os.dup2(self.stdout_fd, 1)
        os.dup2(self.stdin_fd, 0)


async def serve_stdio(
    server: Server[Any], wire: StdioWire | None = None, *, limit: int = STDIO_MESSAGE_BYTES
) -> None:
    """Serve ``server`` over this process's stdin/stdout until stdin closes.

    Each message the client sends is one line of at most ``limit`` bytes; a longer one
    is discarded unread and answered with :func:`oversize_error` (see the module
    docstring), and a warning naming the limit is logged (``toolproof.mcp``).

    Args:
        server: the MCP server.
        wire: the claimed stdin/stdout (:class:`StdioWire`); without it they are claimed
            now and released on return, so output written earlier, while the Toolset
            loaded, would have reached the client.
        limit: the longest message read, in bytes (``[serve] max_message_bytes``).

    """
    own = wire is None
    claimed = StdioWire() if wire is None else wire
    writer = LockedWriter(claimed.writer())

    async def refuse() -> None:
        logger.warning(
            "an MCP client sent a message longer than the stdio limit of %d bytes "
            "([serve] max_message_bytes); it was discarded and answered with error %d",
            limit,
            INVALID_REQUEST,
        )
        await writer.write_line(oversize_error(limit))

    lines: Any = BoundedLines(claimed.stdin_fd, limit, refuse)
    try:
        async with stdio_server(lines, writer) as (read_stream, write_stream):  # type: ignore[arg-type]
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        if own:
            claimed.release()
