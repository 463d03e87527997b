"""The ``sandbox`` backend: the ``process`` pool, each worker confined by bubblewrap.

Every worker of a :class:`SandboxPool` is ``bwrap <profile> -- python -m
toolproof.adapters.process_worker --config FILE --sandbox PROFILE`` (Debian's
``bubblewrap``), so it and every process its bodies start run with:

* **no network**: a network namespace of their own, holding only ``lo`` (what the
  allow-list opens is :mod:`toolproof.backends.egress`);
* **a read-only view of the filesystem** (``--ro-bind / /``, a fresh ``/proc`` and
  ``/dev``) except the worker's **scratch directory**, bound read-write at its own
  path, which the worker empties after every call (:mod:`toolproof.backends.sandbox_inside`);
* **no capabilities** (a user namespace of their own, ``--cap-drop ALL``), a PID
  namespace (when the worker ends, the kernel ends everything left inside it), a new
  session, IPC and UTS namespaces;
* **an environment of the named variables only** (``--clearenv``).

The pool, its kill guarantees and its cgroup cells are the ``process`` backend's
(:class:`~toolproof.backends.process.ProcessPool`). Where the host lacks a mechanism
(no ``bwrap``, user namespaces disabled) :func:`check_mechanisms` refuses, naming
it: a sandbox variant never runs a body unconfined.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolproof.backends.containment import TAG_ENV, Cell
from toolproof.backends.egress import (
    EgressLink,
    EgressProxy,
    inside_addresses,
    listener_targets,
)
from toolproof.backends.limits import LimitCell, Limits, check_limits
from toolproof.backends.pipes import WorkerHandle
from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import MAX_FRAME
from toolproof.backends.seccomp import write_filter
from toolproof.backends.worker import WORKER_ENV
from toolproof.contract.bounds import Seconds
from toolproof.contract.tools import ToolResult
from toolproof.errors import BackendError

__all__ = [
    "BWRAP_INSTALL",
    "SandboxConfig",
    "SandboxPool",
    "bwrap_command",
    "check_mechanisms",
]

BWRAP_INSTALL = "apt-get install bubblewrap (Debian's package; README, Installing)"
"""How to install the one system dependency of the ``sandbox`` backend."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9.-]{1,253}):(?P<port>[0-9]{1,5})$")
_ALIASES = ipaddress.IPv4Network("127.64.0.0/24")
_PASSED = ("PYTHONPATH",)
"""Variables the worker needs to start (popped before any body runs unless named)."""


class SandboxConfig(BaseModel):
    """Config (the **profile**) of the ``sandbox`` backend.

    ``[backends.sandbox]`` holds the Toolset-wide profile; a variant's own config
    overrides its keys. The merged table is the layer's config, so the profile is in
    the variant's descriptor and a changed profile changes the run id.

    Attributes:
        timeout: seconds a call may run before its worker is killed (``None``: no limit).
        workers: worker processes in the pool.
        start_timeout: seconds a worker may take to build the Toolset.
        max_result_bytes: the largest result (bytes of canonical JSON) a worker sends back.
        env: the names of the caller's variables the body sees (its only environment,
            with ``TMPDIR`` = the scratch directory and ``TOOLPROOF_WORKER=1``).
        allow: ``host:port`` destinations the body may connect to (default: none).
        memory_mib: memory limit of each worker and what it starts, MiB (cgroup).
        pids: the most processes (and threads) each worker and what it starts may hold.
        cpus: CPU time per wall-clock second each worker may use (``0.5``: half a CPU).
        bwrap: the bubblewrap executable (a name on ``PATH`` or a path).

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: Seconds | None = None
    workers: int = Field(default=2, ge=1, le=64)
    start_timeout: Seconds = 30.0
    max_result_bytes: int = Field(default=MAX_FRAME, ge=1, le=MAX_FRAME)
    env: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    memory_mib: int | None = Field(default=None, ge=16, le=1 << 30)
    pids: int | None = Field(default=None, ge=4, le=1 << 22)
    cpus: float | None = Field(default=None, gt=0, le=1024)
    bwrap: str = "bwrap"

    @field_validator("env")
    @classmethod
    def _names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if _ENV_NAME.match(name) is None:
                raise ValueError(
                    f"env entry {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )
        return tuple(sorted(set(names)))

    @field_validator("allow")
    @classmethod
    def _destinations(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        for entry in entries:
            found = _HOST_PORT.match(entry)
            if found is None or not 1 <= int(found["port"]) <= 65535:
                raise ValueError(
                    f"allow entry {entry!r} is not host:port (a host name or IPv4 address, "
                    "a port 1-65535)"
                )
            try:
                address = ipaddress.IPv4Address(found["host"])
            except ValueError:
                continue
            if address in _ALIASES:
                raise ValueError(
                    f"allow entry {entry!r}: {_ALIASES} is reserved for the sandbox's "
                    "host-name aliases"
                )
            if not address.is_loopback:
                raise ValueError(
                    f"allow entry {entry!r}: the sandbox reaches an address outside "
                    "127.0.0.0/8 only by a host name (its /etc/hosts maps the name)"
                )
        return tuple(sorted(set(entries)))

    def profile(self) -> dict[str, Any]:
        """What the worker applies inside the sandbox (JSON; ``--sandbox``)."""
        return {"env": list(self.env), "allow": list(self.allow)}


def _resolve_bwrap(bwrap: str) -> str:
    found = shutil.which(bwrap)
    if found is None:
        raise BackendError(
            f"the sandbox backend cannot start: bubblewrap ({bwrap!r}) was not found (rule: "
            f"a sandbox never runs a body unconfined; install it: {BWRAP_INSTALL})"
        )
    return found


def bwrap_command(bwrap: str, scratch: Path, *, extra: list[str] | None = None) -> list[str]:
    """The bubblewrap arguments of a worker, up to and including ``--``.

    Args:
        bwrap: the resolved bubblewrap executable.
        scratch: the worker's scratch directory (read-write, at its own path, the cwd).
        extra: more bubblewrap options (bind mounts, ``--setenv``), before ``--``.

    """
    return [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--tmpfs",
        "/dev/shm",
        "--bind",
        str(scratch),
        str(scratch),
        "--chdir",
        str(scratch),
        "--clearenv",
        *(extra or []),
        "--",
    ]


_CHECKED: dict[str, str] = {}


def check_mechanisms(bwrap: str) -> str:
    """Check once per process that bubblewrap can build the sandbox here; return its path.

    It runs ``true`` in a sandbox of the same namespaces and mounts as a worker's.

    Raises:
        BackendError: bubblewrap is missing, or the kernel refused a namespace (user
            namespaces disabled, say): the message is bubblewrap's, with what to do.

    """
    if bwrap in _CHECKED:
        return _CHECKED[bwrap]
    path = _resolve_bwrap(bwrap)
    scratch = Path(tempfile.mkdtemp(prefix="toolproof-sandbox-check-"))
    try:
        probe = subprocess.run(
            [*bwrap_command(path, scratch), "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendError(
            f"the sandbox backend cannot start: {path} failed to run: {exc} (rule: a sandbox "
            "never runs a body unconfined)"
        ) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BackendError(
            f"the sandbox backend cannot start: bubblewrap could not build the sandbox "
            f"(user, pid, network, ipc and uts namespaces, read-only mounts): {said} (rule: a "
            "sandbox never runs a body unconfined; enable unprivileged user namespaces, "
            "e.g. sysctl kernel.unprivileged_userns_clone=1, or run as root)"
        )
    _CHECKED[bwrap] = path
    return path


_JOIN = (
    '{ echo 0 > "$0"; } 2>/dev/null; n=$1; shift; while [ "$n" -gt 0 ]; do '
    'echo 0 > "$1" || { echo "toolproof sandbox: cannot join the limit cgroup $1" >&2; '
    'exit 125; }; shift; n=$((n - 1)); done; exec "$@"'
)
"""The shell that joins the worker's cgroups (its cell's, tolerated to fail; each limit
cgroup, required) and then ``exec``s bubblewrap, so nothing is forked outside them."""


class SandboxCell(Cell):
    """A worker's :class:`Cell` plus its sandbox's files and egress channel.

    Its directory holds ``scratch/`` (bound read-write), ``hosts`` (the sandbox's
    ``/etc/hosts``) and the seccomp program; all of it is removed when the cell closes.

    Args:
        use_cgroup: as for :class:`Cell`.
        pool: the pool whose worker this cell contains.

    """

    def __init__(self, *, use_cgroup: bool, pool: SandboxPool) -> None:
        super().__init__(use_cgroup=use_cgroup)
        self.filter = -1
        self.link: EgressLink | None = None
        self.control: socket.socket | None = None
        self.inherited: socket.socket | None = None
        self.home = Path(tempfile.mkdtemp(prefix="toolproof-sandbox-"))
        self.scratch = self.home / "scratch"
        self.scratch.mkdir()
        self.hosts = self.home / "hosts"
        self.pool = pool
        lines = ["127.0.0.1 localhost"]  # no IPv6: an entry is reached over IPv4
        for entry, inside in pool.inside.items():
            host = entry.rsplit(":", 1)[0]
            if not inside.startswith(f"{host}:") and host != "localhost":
                lines.append(f"{inside.rsplit(':', 1)[0]} {host}")
        self.hosts.write_text("\n".join(dict.fromkeys(lines)) + "\n", encoding="ascii")
        self.limit: LimitCell | None = None
        if pool.limits.controllers():
            try:
                self.limit = LimitCell(pool.limits, self.cgroup)
            except OSError:
                self.close()
                raise
        self.filter = os.open(pool.filter, os.O_RDONLY)
        self.pool = pool
        if pool.inside:
            self.control, self.inherited = socket.socketpair()

    def fds(self) -> tuple[int, ...]:
        """The descriptors the worker inherits (seccomp program, egress channel)."""
        extra = () if self.inherited is None else (self.inherited.fileno(),)
        return (self.filter, *extra)

    def enter(self, pid: int) -> None:
        """Move ``pid`` into the cgroup; close the worker's fds here; serve its egress."""
        super().enter(pid)
        os.close(self.filter)
        self.filter = -1
        if self.inherited is not None and self.control is not None:
            self.inherited.close()
            self.inherited = None
            self.link = self.pool.egress.attach(self.control, self.pool.targets)
            self.control = None

    def close(self) -> None:
        """Kill what is left, stop its egress, remove the cgroups and its files (idempotent)."""
        super().close()
        if self.limit is not None:
            self.limit.close()
        if self.link is not None:
            self.pool.egress.detach(self.link)
            self.link = None
        for sock in (self.control, self.inherited):
            if sock is not None:
                sock.close()
        self.control = self.inherited = None
        if self.filter >= 0:
            os.close(self.filter)
            self.filter = -1
        shutil.rmtree(self.home, ignore_errors=True)


class SandboxPool(ProcessPool):
    """A :class:`ProcessPool` whose workers run confined by ``config``'s profile.

    Args:
        config_path: the ``toolproof.toml`` every worker builds its Toolset from.
        config: the profile (:class:`SandboxConfig`).
        python: the interpreter to run workers with (default: this one).

    Raises:
        BackendError: (from the constructor) the host lacks a mechanism
            (:func:`check_mechanisms`, or libseccomp).

    """

    def __init__(
        self, config_path: str | Path, config: SandboxConfig, *, python: str | None = None
    ) -> None:
        self.sandbox = config
        inside = os.environ.get(WORKER_ENV) == "1"  # it refuses to start there anyway
        self.bwrap = config.bwrap if inside else check_mechanisms(config.bwrap)
        self.inside = inside_addresses(config.allow)
        self.targets = listener_targets(self.inside)
        self.egress = EgressProxy()
        self.limits = Limits(config.memory_mib, config.pids, config.cpus)
        if not inside:
            try:
                check_limits(self.limits)
            except OSError as exc:
                raise BackendError(
                    f"the sandbox backend cannot start: {exc} (rule: a sandbox never drops a "
                    "limit of its profile)"
                ) from exc
        self._files: Path | None = None
        self.filter = Path(os.devnull)
        if not inside:  # a worker's own Toolset never starts this pool: nothing to write
            self._files = Path(tempfile.mkdtemp(prefix="toolproof-sandbox-pool-"))
            self.filter = self._files / "seccomp.bpf"
            try:
                write_filter(self.filter)
            except OSError as exc:
                shutil.rmtree(self._files, ignore_errors=True)
                raise BackendError(
                    f"the sandbox backend cannot start: {exc} (rule: a sandbox never runs a "
                    "body unconfined)"
                ) from exc
        super().__init__(
            config_path,
            workers=config.workers,
            start_timeout=config.start_timeout,
            python=python,
            max_result_bytes=config.max_result_bytes,
        )

    def _new_cell(self) -> Cell:
        return SandboxCell(use_cgroup=self.use_cgroup, pool=self)

    def _launch(
        self, cell: Cell, command: list[str]
    ) -> tuple[list[str], dict[str, str], tuple[int, ...]]:
        """Wrap the worker ``command`` in bubblewrap with a cleared environment."""
        assert isinstance(cell, SandboxCell)
        env = {**cell.environment(), "TMPDIR": str(cell.scratch)}
        for name in (*self.sandbox.env, *_PASSED):
            value = os.environ.get(name)
            if value is not None:
                env[name] = value
        extra = ["--ro-bind", str(cell.hosts), "/etc/hosts", "--seccomp", str(cell.filter)]
        if any(port < 1024 for _, port in self.targets):  # to bind it in its own namespace
            extra += ["--cap-add", "CAP_NET_BIND_SERVICE"]
        for name, value in sorted(env.items()):
            extra += ["--setenv", name, value]
        profile: dict[str, Any] = {
            **self.sandbox.profile(),
            "scratch": str(cell.scratch),
            "listen": self.inside,
        }
        if cell.inherited is not None:
            profile["egress_fd"] = cell.inherited.fileno()
        wrapped = [
            *bwrap_command(self.bwrap, cell.scratch, extra=extra),
            *command,
            "--sandbox",
            json.dumps(profile, sort_keys=True),
        ]
        limits = cell.limit.procs() if cell.limit is not None else []
        if cell.cgroup is not None or limits:  # join them before bwrap forks (exec keeps the pid)
            own = str(cell.cgroup / "cgroup.procs") if cell.cgroup is not None else os.devnull
            wrapped = ["/bin/sh", "-c", _JOIN, own, str(len(limits)), *map(str, limits), *wrapped]
        environment = {TAG_ENV: cell.tag, "PATH": os.environ.get("PATH", os.defpath)}
        return wrapped, environment, cell.fds()

    def _broken(self, worker: WorkerHandle, variant: str) -> ToolResult | None:
        """A ``denied_by_sandbox`` failure when the call hit a limit of the worker's cell."""
        cell = worker.cell
        if not isinstance(cell, SandboxCell) or cell.limit is None:
            return None
        rules = cell.limit.broken()
        if not rules:
            return None
        return ToolResult.fail(
            "denied_by_sandbox",
            f"tool {variant!r} broke its sandbox profile: {'; '.join(rules)}",
            where="worker",
            retryable=False,
            detail={"rules": rules},
        )

    def close(self, grace: float = 2.0) -> None:
        """End every worker (:meth:`ProcessPool.close`), then the egress proxy; idempotent."""
        super().close(grace)
        self.egress.close()
        if self._files is not None:
            shutil.rmtree(self._files, ignore_errors=True)
