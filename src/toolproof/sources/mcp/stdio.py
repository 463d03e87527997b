"""The stdio side of an MCP server process: how it is launched, how it ended, its junk lines.

A stdio server runs under :data:`EXIT_WATCH`, a watcher process that writes the server's
exit status to a file (the SDK's ``stdio_client`` keeps its process to itself), so a
failed start or a dead server is reported as ``exited with status 7`` or ``was killed by
signal 9 (SIGKILL)``. Lines a server prints on stdout that are not JSON-RPC are reported
by the connection, bounded (:data:`JUNK_REPORT_SECONDS`), instead of the SDK's traceback
per line. The watcher relays the server's stdout and bounds each message
(``[[mcp]] max_message_bytes``, 32 MiB by default).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

from mcp import StdioServerParameters

from toolproof.contract.bounds import limit_note
from toolproof.sources.mcp.common import McpServer

__all__ = [
    "EXIT_WAIT_SECONDS",
    "EXIT_WATCH",
    "JUNK_REPORT_SECONDS",
    "JunkReport",
    "exit_description",
    "junk_line",
    "limit_description",
    "read_status",
    "stdio_parameters",
]

logger = logging.getLogger("toolproof.mcp")

JUNK_REPORT_SECONDS = 5.0
"""At most one log line per server per this many seconds about stdout lines that are not
JSON-RPC (the first such line is reported at once, the rest counted and summarised)."""
JUNK_SHOWN_CHARS = 200
"""How much of a junk line a report quotes."""
EXIT_WAIT_SECONDS = 1.0
"""How long a failure report waits for a dead server's exit status to be collected."""

_SDK_PARSE_FAILURE = "Failed to parse JSONRPC message from server"


class _NoParseTracebacks(logging.Filter):
    """Drop the SDK's traceback per unparsable stdout line; :class:`McpConnection` summarises.

    A server printing junk made the SDK log one traceback per line (33.6 MB of stderr
    in 5 s); the connection reports those lines itself, bounded and rate-limited.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _SDK_PARSE_FAILURE


logging.getLogger("mcp.client.stdio").addFilter(_NoParseTracebacks())

EXIT_WATCH = """
import os, subprocess, sys
status, limit, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
try:
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
except OSError as exc:
    open(status, "w").write(f"error {exc.errno or 0}")
    sys.exit(127)
source, pending, over = child.stdout.fileno(), bytearray(), False
def send(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
try:
    while chunk := os.read(source, 1 << 16):
        cut = chunk.rfind(b"\\n")
        if cut < 0:
            pending += chunk
        else:
            first = chunk.find(b"\\n")
            inner = chunk[first + 1 : cut].split(b"\\n") if limit < cut else ()
            over = len(pending) + first > limit or max(map(len, inner), default=0) > limit
            if over:
                break
            send(pending)
            send(chunk[: cut + 1])
            pending = bytearray(chunk[cut + 1 :])
        over = len(pending) > limit
        if over:
            break
except BrokenPipeError:
    pass
child.stdout.close()
if over:
    child.kill()
code = child.wait()
open(status, "w").write(f"limit {limit}" if over else str(code))
sys.exit(1 if over else code if code >= 0 else 128 - code)
"""
"""The watcher a stdio server runs under: it runs the server with the same stdin, stderr,
environment and directory and relays its stdout line by line, then writes how the server
ended to a status file (``"7"``, ``"-9"`` for a signal, ``"error 2"`` when it could not
be started). A line (one JSON-RPC message) longer than ``max_message_bytes`` is never
relayed: the server is killed and the status is ``"limit <bytes>"``, so the client's
memory holds at most one message of that size. The SDK's stdio client keeps its
process to itself, so this is how a connection learns an exit status, and bounds a
message, through public APIs only; the SDK's shutdown signals the whole process group."""


def stdio_parameters(server: McpServer, status: str) -> StdioServerParameters:
    """The SDK's launch parameters for ``server``, run under :data:`EXIT_WATCH`.

    Args:
        server: a stdio server (``command`` set).
        status: the file the watcher writes the exit status to.

    """
    assert server.command is not None
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-I",
            "-c",
            EXIT_WATCH,
            status,
            str(server.max_message_bytes),
            server.command,
            *server.args,
        ],
        env={**os.environ, **server.env},
        cwd=server.cwd,
    )


def read_status(path: str | None) -> int | OSError | str | None:
    """What :data:`EXIT_WATCH` wrote: the exit code, the start failure, or ``None`` (not yet).

    A server stopped for a message over the limit gives the description of that
    (``was stopped: it wrote a JSON-RPC message over the stdio limit of ... bytes``).
    """
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    if text.startswith("limit "):
        return limit_description(int(text.split()[1]))
    if text.startswith("error "):
        errno_value = int(text.split()[1])
        return OSError(errno_value, os.strerror(errno_value))
    return int(text) if text.lstrip("-").isdigit() else None


def limit_description(limit: int) -> str:
    """How a server stopped for an over-limit message ended, naming the limit and its key."""
    return (
        f"was stopped: it wrote a JSON-RPC message longer than the stdio limit of {limit} "
        f"bytes ({limit_note(limit, '[[mcp]] max_message_bytes')})"
    )


class JunkReport:
    """A server's stdout lines that are not JSON-RPC: counted, logged at most once a while.

    The first one is logged at once, quoted (:func:`junk_line`); the rest are counted and
    summarised at most once per :data:`JUNK_REPORT_SECONDS`, and by :meth:`flush`.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.total = 0
        self._unreported = 0
        self._reported_at: float | None = None

    def note(self, problem: Exception) -> None:
        """Count one line (the SDK's parse failure of it)."""
        self.total += 1
        now = time.monotonic()
        if self._reported_at is None:
            self._reported_at = now
            logger.warning(
                "MCP server %r wrote a line to stdout that is not JSON-RPC (ignored; further "
                "ones are counted and summarised every %g s): %s",
                self.server,
                JUNK_REPORT_SECONDS,
                junk_line(problem),
            )
            return
        self._unreported += 1
        if now - self._reported_at >= JUNK_REPORT_SECONDS:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        """Log the lines not yet reported, if any."""
        if self._unreported:
            logger.warning(
                "MCP server %r wrote %d more lines to stdout that are not JSON-RPC (ignored; "
                "%d in all)",
                self.server,
                self._unreported,
                self.total,
            )
        self._unreported = 0
        self._reported_at = time.monotonic() if now is None else now


def junk_line(problem: Exception) -> str:
    """The offending line of an SDK parse failure, quoted and cut to 200 characters."""
    errors = getattr(problem, "errors", None)
    try:
        line = errors()[0]["input"] if callable(errors) else None
    except (IndexError, KeyError, TypeError):
        line = None
    if isinstance(line, str | bytes):
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        return repr(text[:JUNK_SHOWN_CHARS])
    return str(problem).replace("\n", " ")[:JUNK_SHOWN_CHARS]


def exit_description(returncode: int | None) -> str | None:
    """``"exited with status 7"`` / ``"was killed by signal 9 (SIGKILL)"``; ``None`` if alive."""
    if returncode is None:
        return None
    if returncode < 0:
        try:
            name = f" ({signal.Signals(-returncode).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-returncode}{name}"
    return f"exited with status {returncode}"
