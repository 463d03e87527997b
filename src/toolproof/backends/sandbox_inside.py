"""The worker's side of the ``sandbox`` backend: scrub, reset and name broken rules.

Bubblewrap (:mod:`toolproof.backends.sandbox`) is what **enforces** the profile: the
network namespace, the read-only mounts, the dropped capabilities. A body that breaks a
rule gets what the kernel gives (``ECONNREFUSED``, ``EROFS``), whatever language it
is written in. :class:`SandboxGuard` only **names** the rule for a Python body: an
audit hook (:func:`sys.addaudithook`, which a body cannot remove) sees a connect to a
destination not in ``allow`` or a write outside the scratch directory, raises
``PermissionError`` with the rule at once (``egress denied: 127.0.0.1:9 not in
allow``) and records it; the call then fails with ``kind="denied_by_sandbox"``
naming it, even when the body caught the exception. A denial in a thread that was
running before the first call (a span exporter's) is raised but charged to no call.

Before the Toolset is built the guard scrubs ``os.environ`` to the named variables
(plus ``TMPDIR`` and ``TOOLPROOF_WORKER``), stops bytecode writes, and makes the
scratch directory the working directory; after every call it empties the scratch
directory (and the sandbox's private ``/dev/shm``), so each call starts with empty ones.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from toolproof.backends.protocol import ProtocolError, decode_request, encode_result
from toolproof.contract.tools import ToolResult

__all__ = ["SandboxGuard"]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITE_EVENTS = {
    "os.mkdir": 0,
    "os.remove": 0,
    "os.rmdir": 0,
    "os.rename": 1,
    "os.symlink": 1,
    "os.link": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.utime": 0,
}
"""Audit events that write to the filesystem -> the index of the path they write."""

_WRITABLE = ("/dev", "/proc")
"""Paths the hook lets a write through besides the scratch directory: the sandbox's own
``/dev`` (read-only but for its device nodes and a private ``/dev/shm``) and ``/proc``
(``/proc/self/fd/N``); the kernel refuses the rest there."""

_SHM = Path("/dev/shm")
"""The sandbox's private shared-memory tmpfs, emptied after every call like scratch."""


def _send_listeners(fd: int, listen: dict[str, str]) -> None:
    """Bind a listener per allow entry in this namespace; hand them all to the pool.

    They go, one per distinct address in sorted order, over the socket pair ``fd`` the pool
    gave the worker (``SCM_RIGHTS``); the pool's egress proxy serves them from outside
    (:mod:`toolproof.backends.egress`). This process keeps no copy of them or of ``fd``.
    """
    control = socket.socket(fileno=fd)
    listeners: list[socket.socket] = []
    try:
        for inside in sorted(set(listen.values())):  # one per address (listener_targets)
            host, port = inside.rsplit(":", 1)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.bind((host, int(port)))
            listener.listen(128)
        socket.send_fds(control, [b"listeners"], [item.fileno() for item in listeners])
    finally:
        for listener in listeners:
            listener.close()
        control.close()


class SandboxGuard:
    """The profile inside the worker (see the module docstring).

    Args:
        profile: the ``--sandbox`` JSON object: ``env`` (names kept), ``allow``
            (``host:port`` entries), ``scratch`` (the scratch directory), and
            ``listen`` (``host:port`` -> the address the egress listener took inside).

    """

    def __init__(self, profile: dict[str, Any]) -> None:
        self.scratch = Path(profile["scratch"])
        self.allowed: set[tuple[str, int]] = set()
        self.hosts: set[str] = set()
        for entry, inside in dict(profile.get("listen") or {}).items():
            host, port = str(inside).rsplit(":", 1)
            self.allowed.add((host, int(port)))
            self.hosts.add(str(entry).rsplit(":", 1)[0])
        egress = profile.get("egress_fd")
        if egress is not None:
            _send_listeners(int(egress), dict(profile.get("listen") or {}))
        self.violations: list[str] = []
        self.background: set[int | None] | None = None
        self.in_call = False
        keep = {*profile.get("env", ()), "TMPDIR"}
        for name in list(os.environ):
            if name not in keep:
                del os.environ[name]
        sys.dont_write_bytecode = True
        os.chdir(self.scratch)
        sys.addaudithook(self._audit)

    # -- the audit hook -------------------------------------------------------------

    def _deny(self, rule: str) -> None:
        attributed = self.in_call and threading.get_ident() not in (self.background or ())
        if attributed and rule not in self.violations:
            self.violations.append(rule)
        raise PermissionError(rule)

    def _writable(self, path: object) -> bool:
        if isinstance(path, int) or path is None:
            return True
        try:
            text = os.fsdecode(path)  # type: ignore[arg-type]
        except TypeError:
            return True
        real = os.path.realpath(os.path.abspath(text))
        scratch = str(self.scratch)
        if real == scratch or real.startswith(scratch + os.sep):
            return True
        return any(real == root or real.startswith(root + os.sep) for root in _WRITABLE)

    def _check_write(self, path: object) -> None:
        if not self._writable(path):
            self._deny(f"write denied: {os.fsdecode(path)} not in scratch {self.scratch}")  # type: ignore[arg-type]

    def _check_connect(self, sock: object, address: object) -> None:
        family = getattr(sock, "family", None)
        if family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
            return
        host, port = str(address[0]), int(address[1])
        if (host, port) not in self.allowed:
            shown = f"[{host}]" if ":" in host else host
            self._deny(f"egress denied: {shown}:{port} not in allow")

    def _check_lookup(self, host: object, port: object) -> None:
        if not isinstance(host, str | bytes):
            return
        name = os.fsdecode(host).rstrip(".").lower()
        try:
            ipaddress.ip_address(name)
            return  # an address: its connect is checked
        except ValueError:
            pass
        if name in self.hosts or name == "localhost":
            return
        shown = name if port in (None, 0, "") else f"{name}:{port}"
        self._deny(f"egress denied: {shown} not in allow")

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, _, flags = args
            mode = args[1] if isinstance(args[1], str) else ""
            if (isinstance(flags, int) and flags & _WRITE_FLAGS) or any(c in mode for c in "wax+"):
                self._check_write(path)
        elif event in _WRITE_EVENTS:
            self._check_write(args[_WRITE_EVENTS[event]])
        elif event == "socket.connect":
            self._check_connect(args[0], args[1])
        elif event == "socket.getaddrinfo":
            self._check_lookup(args[0], args[1])

    # -- per call -------------------------------------------------------------------

    def begin(self) -> None:
        """Start a call: no rule broken yet; the scratch directory is the cwd."""
        self.violations = []
        os.chdir(self.scratch)
        if self.background is None:  # threads already running before the first call (a
            # span exporter's) are not a body's; the sync-body threads start after it
            caller = threading.get_ident()
            self.background = {t.ident for t in threading.enumerate() if t.ident != caller}
        self.in_call = True

    def end(self, request: bytes, answer: bytes) -> bytes:
        """End a call: empty the scratch directory; fail it if it broke a rule.

        Returns:
            ``answer``, or a ``denied_by_sandbox`` failure naming every rule broken.

        """
        self.in_call = False
        for folder in (self.scratch, _SHM):
            with contextlib.suppress(OSError):
                for entry in list(os.scandir(folder)):
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
        if not self.violations:
            return answer
        try:
            variant: object = decode_request(request).variant
        except ProtocolError:
            variant = "?"
        rules = "; ".join(self.violations)
        failure = ToolResult.fail(
            "denied_by_sandbox",
            f"tool {variant!r} broke its sandbox profile: {rules}",
            where="worker",
            retryable=False,
            detail={"rules": list(self.violations)},
        )
        return encode_result(failure)
