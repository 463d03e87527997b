"""CPU, memory and process-count limits of a sandboxed worker, through cgroups.

A worker's :class:`~toolproof.backends.containment.Cell` is a cgroup v2 of its own
where the host allows it. A limit is written there when the cell's parent delegates
the controller (the cell then has ``memory.max``, ``pids.max``, ``cpu.max``); on a
host whose cgroup v2 hierarchy does not offer it (a "hybrid" host, where the
controllers are mounted as cgroup v1 hierarchies) the limit goes to a cgroup of the
worker's own in that controller's writable v1 hierarchy. Where neither exists
:func:`check_limits` refuses, naming the controller: a limit is never silently dropped.

The worker joins every limit cgroup before bubblewrap forks (a ``/bin/sh`` that writes
``0`` to each ``cgroup.procs`` and then ``exec``s it), so nothing it starts is born
outside. :meth:`LimitCell.broken` reads the kernel's counters (``oom_kill`` of
``memory.events`` or ``memory.oom_control``, ``max`` of ``pids.events``) so a call that
hit a limit fails naming it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from toolproof.backends.containment import Cell

__all__ = ["LimitCell", "Limits", "check_limits"]

_PERIOD_US = 100_000
_PREFIX = "toolproof-"


@dataclass(frozen=True)
class Limits:
    """The limits of one worker and everything it starts.

    Attributes:
        memory_mib: memory, MiB (``None``: none).
        pids: processes and threads (``None``: none).
        cpus: CPU seconds per wall-clock second (``None``: none).

    """

    memory_mib: int | None = None
    pids: int | None = None
    cpus: float | None = None

    def controllers(self) -> list[str]:
        """The cgroup controllers these limits need."""
        wanted = [("memory", self.memory_mib), ("pids", self.pids), ("cpu", self.cpus)]
        return [name for name, value in wanted if value is not None]

    def files(self, controller: str, v2: bool) -> list[tuple[str, str]]:
        """``(file, value)`` to write, in order, for ``controller`` (v2 or v1 names)."""
        if controller == "memory" and self.memory_mib is not None:
            size = str(self.memory_mib << 20)
            if v2:
                return [("memory.max", size), ("memory.swap.max", "0")]
            return [("memory.limit_in_bytes", size), ("memory.memsw.limit_in_bytes", size)]
        if controller == "pids" and self.pids is not None:
            return [("pids.max", str(self.pids))]
        if controller == "cpu" and self.cpus is not None:
            quota = max(int(self.cpus * _PERIOD_US), 1000)
            if v2:
                return [("cpu.max", f"{quota} {_PERIOD_US}")]
            return [("cpu.cfs_period_us", str(_PERIOD_US)), ("cpu.cfs_quota_us", str(quota))]
        return []

    def rule(self, controller: str) -> str:
        """How a broken limit is named in a failure."""
        if controller == "memory":
            return (
                f"memory limit: memory_mib={self.memory_mib} exceeded (the kernel killed a process)"
            )
        return f"process limit: pids={self.pids} reached (a fork or thread was refused)"


def _v1_base(controller: str) -> Path | None:
    """The caller's own cgroup in the writable v1 hierarchy of ``controller``, or None."""
    mount = own = None
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 3 and fields[2] == "cgroup" and controller in fields[3].split(","):
                    mount = Path(fields[1])
                    break
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                number, names, path = line.rstrip("\n").split(":", 2)
                if number != "0" and controller in names.split(","):
                    own = path
    except OSError:
        return None
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/")
    return base if os.access(base, os.W_OK) else None


def _remove_stale(base: Path) -> None:
    """Remove the empty limit cgroups of callers that died (one killed by SIGKILL leaves them)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            if not entry.name.startswith(_PREFIX):
                continue
            owner = entry.name[len(_PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


def _write(path: Path, files: list[tuple[str, str]]) -> None:
    for name, value in files:
        target = path / name
        if name.endswith(("swap.max", "memsw.limit_in_bytes")) and not target.exists():
            continue  # no swap accounting on this host: nothing to bound
        target.write_text(value, encoding="ascii")


class LimitCell:
    """The limit cgroups of one worker (see the module docstring).

    Args:
        limits: the limits.
        v2: the worker's cgroup v2 cell directory, or ``None``.

    Raises:
        OSError: a controller is offered neither by ``v2`` nor by a writable v1
            hierarchy, or refused a value (the message names it).

    """

    def __init__(self, limits: Limits, v2: Path | None) -> None:
        self.limits = limits
        self.paths: dict[str, Path] = {}
        self.created: list[Path] = []
        self.seen: dict[str, int] = {}
        try:
            for controller in limits.controllers():
                files = limits.files(controller, v2=True)
                if v2 is not None and (v2 / files[0][0]).exists():
                    _write(v2, files)
                    self.paths[controller] = v2
                    continue
                base = _v1_base(controller)
                if base is None:
                    raise OSError(
                        f"the cgroup {controller} controller is offered neither in the "
                        "worker's cgroup v2 cell (its parent does not delegate it: echo "
                        f"+{controller} > <parent>/cgroup.subtree_control) nor as a writable "
                        "cgroup v1 hierarchy"
                    )
                _remove_stale(base)
                path = base / f"{_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
                path.mkdir()
                self.created.append(path)
                _write(path, limits.files(controller, v2=False))
                self.paths[controller] = path
        except OSError:
            self.close()
            raise
        for controller in self.paths:
            self.seen[controller] = self._count(controller)

    def procs(self) -> list[Path]:
        """The ``cgroup.procs`` files the worker joins before it starts (v1 ones)."""
        return [path / "cgroup.procs" for path in self.created]

    def _count(self, controller: str) -> int:
        path = self.paths[controller]
        names = {
            "memory": [("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill")],
            "pids": [("pids.events", "max")],
        }.get(controller, [])
        for name, key in names:
            try:
                text = (path / name).read_text(encoding="ascii")
            except OSError:
                continue
            for line in text.splitlines():
                fields = line.split()
                if len(fields) == 2 and fields[0] == key:
                    return int(fields[1])
        return 0

    def broken(self) -> list[str]:
        """The limits hit since the last look (each named), reading the kernel's counters."""
        rules = []
        for controller in self.paths:
            count = self._count(controller)
            if count > self.seen[controller]:
                rules.append(self.limits.rule(controller))
            self.seen[controller] = count
        return rules

    def close(self) -> None:
        """Remove the v1 cgroups this cell created (once their processes are gone)."""
        created, self.created = self.created, []
        for path in created:
            deadline = time.monotonic() + 2.0
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still populated while the killed processes exit
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.005)


def check_limits(limits: Limits) -> None:
    """Check that this host can hold ``limits`` (a cell is made and removed).

    Raises:
        OSError: a controller is missing or refused a value (the message names it).

    """
    if not limits.controllers():
        return
    cell = Cell()
    try:
        LimitCell(limits, cell.cgroup).close()
    finally:
        cell.close()
