"""Process containment for ``process`` workers: find and kill everything a body started.

A tool body may fork, double-fork, call ``setsid`` or start daemons. The pool must
still end **every** process a worker's bodies started, on a timeout, a cancel, a
pool close, a worker crash, or the death of the caller. Each worker gets a
:class:`Cell`: the strongest container the host allows, and the tree and tag always:

* **a cgroup v2 of its own** (Linux 5.14+, a writable cgroup2 hierarchy: root, or a
  delegated subtree). The pool creates ``<its own cgroup>/toolproof-<pid>-<tag>``
  and moves the worker in before it runs any code (and the worker joins it itself
  before it can fork, should that move come late); every process it starts is born
  inside and cannot leave (moving needs write access to another cgroup's
  ``cgroup.procs``). ``cgroup.kill`` ends all of them in one atomic kernel
  operation, which even a process forking in a loop cannot outrun. A body running
  as **root** can leave (write its pid to the root ``cgroup.procs``), so
  :meth:`Cell.kill` freezes the cgroup, kills the tree and the tag, then the cgroup;
* in every cell **a tree and a tag**, which need no privilege and which detaching does
  not remove: every worker is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``),
  so an orphan anywhere below it (the grandchild of a double fork, a process that
  called ``setsid``) is re-parented to the worker, never to ``init``, while the
  worker lives (:func:`descendants`); and every worker runs with
  ``TOOLPROOF_WORKER_TAG=<random>`` in its environment, which every process it forks
  or execs inherits, so what a crashed worker left is still found (:func:`tagged`).
  :func:`kill_tree` stops (``SIGSTOP``) every process it finds by either mark and
  looks again until no new one appears, then sends ``SIGKILL`` to all, each through
  a pidfd opened and checked when it is found (a pid reused by an unrelated process
  after ``/proc`` was read is never signalled). What
  escapes is a process that both left the tree (its worker died first) and
  replaced its environment, or one that forks away faster than ``/proc`` can be
  read — the limits ``docs/backends.md`` states.

:func:`set_parent_death_signal` and :func:`parent_pidfd` are how a worker notices
that its caller died, even by ``SIGKILL``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import secrets
import signal
import time
from pathlib import Path

__all__ = [
    "CGROUP_ENV",
    "TAG_ENV",
    "Cell",
    "cgroup_freeze",
    "cgroup_kill",
    "descendants",
    "join_cell",
    "kill_tree",
    "parent_pidfd",
    "set_parent_death_signal",
    "set_subreaper",
    "tagged",
]

TAG_ENV = "TOOLPROOF_WORKER_TAG"
"""The environment variable carrying a worker's containment tag (inherited by its descendants)."""

CGROUP_ENV = "TOOLPROOF_WORKER_CGROUP"
"""The environment variable naming a worker's own cgroup directory (empty: no cgroup)."""

_CELL_PREFIX = "toolproof-"

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")


def _prctl(option: int, value: int) -> bool:
    """Call ``prctl(option, value)``; False where there is no ``prctl`` (not Linux)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return False
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return bool(prctl(option, value, 0, 0, 0) == 0)


def set_subreaper() -> bool:
    """Make this process a child subreaper: orphans below it are re-parented to it.

    Returns:
        True when the kernel accepted it (Linux 3.4+).

    """
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent thread ends.

    The kernel ties the signal to the *thread* that forked this process, so it can
    also fire while the parent process lives on; a handler must check
    :func:`os.getppid` before acting.

    Returns:
        True when the kernel accepted it.

    """
    return _prctl(_PR_SET_PDEATHSIG, signum)


def parent_pidfd(parent: int) -> int | None:
    """A pidfd of ``parent`` (readable once it ends), or ``None`` if it has already ended.

    The pid could have been reused between the parent's death and this call, so the
    descriptor is kept only when ``parent`` is still this process's parent after
    opening it (the race a parent-death signal set too late would miss).
    """
    try:
        fd = os.pidfd_open(parent)
    except ProcessLookupError:
        return None
    if os.getppid() != parent:
        os.close(fd)
        return None
    return fd


def _parents() -> dict[int, int]:
    """``pid -> ppid`` of every process, from ``/proc/<pid>/stat``."""
    table: dict[int, int] = {}
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                raw = handle.read()
        except OSError:  # it ended while we read
            continue
        fields = raw.rsplit(b")", 1)[-1].split()
        if len(fields) > 1:
            table[int(entry.name)] = int(fields[1])
    return table


def descendants(root: int) -> set[int]:
    """Every process whose parent chain reaches ``root`` (zombies included)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def tagged(tag: str) -> set[int]:
    """Every process whose initial environment holds ``TOOLPROOF_WORKER_TAG=<tag>``."""
    needle = f"{TAG_ENV}={tag}".encode()
    found: set[int] = set()
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.add(int(entry.name))
    return found


_NO_PIDFD = -1


def _pin(pid: int) -> int | None:
    """A pidfd of ``pid``; ``None`` if it has ended; ``-1`` where none can be had.

    ``-1`` (no pidfd support, or no descriptor left): the process is signalled by pid.
    """
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except (AttributeError, OSError):
        return _NO_PIDFD


def _held(pid: int, fd: int) -> bool:
    """Whether ``pid`` still names the process ``fd`` was opened on (a zombie counts)."""
    if fd == _NO_PIDFD:
        return Path(f"/proc/{pid}").exists()
    try:
        signal.pidfd_send_signal(fd, 0)
    except ProcessLookupError:  # reaped: its pid may be anyone's now
        return False
    except PermissionError:
        return True
    return True


def _ours(pid: int, parents: set[int], needle: bytes | None) -> bool:
    """Whether ``pid`` (just pinned) is a child of ``parents`` or carries the tag ``needle``.

    Checked after the pidfd is open: a pid read from ``/proc`` whose process ended and
    whose pid was reused before it was pinned fails this check, so it is never signalled.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) in parents:
            return True
        if needle is None:
            return False
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in handle.read().split(b"\0")
    except OSError:
        return False


def _signal(pid: int, fd: int, signum: int) -> None:
    """Send ``signum`` through the pidfd ``fd`` (by pid where there is none)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if fd == _NO_PIDFD:
            os.kill(pid, signum)
        else:
            signal.pidfd_send_signal(fd, signum)


def _stop(new: set[int], parents: set[int], needle: bytes | None, pinned: dict[int, int]) -> None:
    """Pin each of ``new`` that is still ours (:func:`_ours`), stop it, add it to ``pinned``."""
    for pid in new:
        fd = _pin(pid)
        if fd is None:
            continue
        if not _ours(pid, parents, needle):
            if fd != _NO_PIDFD:
                os.close(fd)
            continue
        pinned[pid] = fd
        _signal(pid, fd, signal.SIGSTOP)


def kill_tree(
    root: int | None, tag: str | None, *, rounds: int = 100, root_pidfd: int = _NO_PIDFD
) -> set[int]:
    """Stop, then kill, ``root`` and every process below it or carrying ``tag``.

    Every process is signalled through a pidfd opened when it is found and checked
    after opening (its parent is ``root`` or one of the found processes, or it carries
    ``tag``), so a pid reused by an unrelated process after the ``/proc`` scan read it
    is never signalled; ``root``'s children count only while ``root``'s pid is still
    its own. Where pidfds are not available, processes are signalled by pid.

    Args:
        root: the worker's pid (its tree is searched) while it is not reaped, or
            ``None`` when it is gone.
        tag: the worker's containment tag, or ``None``.
        rounds: at most this many search rounds (each finds what the last one's
            stopped processes had forked just before they stopped).
        root_pidfd: a pidfd of ``root`` the caller holds (opened when it started it,
            so it is ``root`` for sure; not closed here); -1: one is opened now.

    Returns:
        The pids signalled (never this process itself).

    """
    me = os.getpid()
    needle = f"{TAG_ENV}={tag}".encode() if tag is not None else None
    pinned: dict[int, int] = {}  # pid -> its pidfd (-1: signalled by pid)
    seen: set[int] = {me}
    root_fd = _NO_PIDFD
    try:
        if root is not None and root != me:
            fd = _pin(root) if root_pidfd == _NO_PIDFD else root_pidfd
            if fd is None or not _held(root, fd):  # reaped: its pid may be anyone's
                root = None
            else:
                root_fd = pinned[root] = fd
                seen.add(root)
                _signal(root, fd, signal.SIGSTOP)
        for _ in range(rounds):
            found: set[int] = set()
            if root is not None:
                found |= descendants(root)
                if root != me and not _held(root, root_fd):
                    # Reaped during the scan: its pid, and so its "children", may be
                    # anyone's now; only the tag still finds what it left.
                    if root_fd not in (_NO_PIDFD, root_pidfd):
                        os.close(root_fd)
                    del pinned[root]
                    found, root = set(), None
            if tag is not None:
                found |= tagged(tag)
            new = found - seen
            if not new:
                break
            seen |= new
            # Not this process itself unless it is the root: a reused pid may now be
            # another child of it (a worker of another cell).
            parents = {*pinned, *found, *([me] if root == me else [])}
            _stop(new, parents, needle, pinned)
        for pid, fd in pinned.items():
            _signal(pid, fd, signal.SIGKILL)
            _signal(pid, fd, signal.SIGCONT)  # a stopped process dies on SIGKILL; belt and braces
        return set(pinned)
    finally:
        for fd in pinned.values():
            if fd not in (_NO_PIDFD, root_pidfd):
                with contextlib.suppress(OSError):
                    os.close(fd)


def _cgroup2_base() -> Path | None:
    """The caller's own cgroup v2 directory, if the hierarchy is mounted and writable."""
    mount = None
    try:
        with open("/proc/self/mounts", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    mount = Path(fields[1])
                    break
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            own = next((line[3:].strip() for line in handle if line.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/")
    if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
        return None
    return base


def _owner_alive(name: str) -> bool:
    try:
        owner = int(name[len(_CELL_PREFIX) :].split("-", 1)[0])
    except ValueError:
        return True
    return Path(f"/proc/{owner}").exists()


def _remove_stale(base: Path) -> None:
    """Remove empty cells whose owner died (a caller killed with SIGKILL leaves one)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            if entry.name.startswith(_CELL_PREFIX) and not _owner_alive(entry.name):
                with contextlib.suppress(OSError):
                    entry.rmdir()


def join_cell() -> bool:
    """Move this process into the cgroup its cell names (``TOOLPROOF_WORKER_CGROUP``).

    A worker calls it before it starts anything, so nothing it forks can be born
    outside its cell even when the pool's own move (:meth:`Cell.enter`) comes late;
    joining the cgroup it is already in changes nothing.

    Returns:
        True when this process is in that cgroup now; False when the variable is empty
        or unset, or the cgroup is gone (the pool fell back to the tree and the tag)
        or refuses it.

    """
    cgroup = os.environ.get(CGROUP_ENV)
    if not cgroup:
        return False
    try:
        (Path(cgroup) / "cgroup.procs").write_text("0", encoding="ascii")  # "0": the writer
    except OSError:
        return False
    return True


def cgroup_freeze(path: Path) -> bool:
    """Freeze the cgroup ``path`` (``cgroup.freeze``): nothing inside forks any more.

    A frozen process still dies of ``SIGKILL`` and ``cgroup.kill``. Returns False where
    the kernel has no ``cgroup.freeze`` (before Linux 5.2) or refuses it.
    """
    try:
        (path / "cgroup.freeze").write_text("1", encoding="ascii")
    except OSError:
        return False
    return True


def cgroup_kill(path: Path) -> bool:
    """Kill every process in the cgroup ``path`` (``cgroup.kill``); False if unsupported."""
    try:
        (path / "cgroup.kill").write_text("1", encoding="ascii")
    except OSError:
        return False
    return True


class Cell:
    """The container of one worker and everything it starts (see the module docstring).

    Args:
        use_cgroup: try a cgroup v2 first (default); False forces the tree and tag.

    Attributes:
        tag: the containment tag (``TOOLPROOF_WORKER_TAG``).
        cgroup: the worker's cgroup directory, or ``None`` (tree and tag only).

    """

    def __init__(self, *, use_cgroup: bool = True) -> None:
        self.tag = secrets.token_hex(12)
        self.cgroup: Path | None = None
        base = _cgroup2_base() if use_cgroup else None
        if base is not None:
            _remove_stale(base)
            path = base / f"{_CELL_PREFIX}{os.getpid()}-{self.tag}"
            try:
                path.mkdir()
            except OSError:
                return
            if (path / "cgroup.kill").exists():
                self.cgroup = path
            else:
                with contextlib.suppress(OSError):
                    path.rmdir()

    @property
    def kind(self) -> str:
        """``"cgroup"`` or ``"tree+tag"``: how this cell contains its processes."""
        return "cgroup" if self.cgroup is not None else "tree+tag"

    def environment(self) -> dict[str, str]:
        """The variables a worker of this cell starts with."""
        return {TAG_ENV: self.tag, CGROUP_ENV: str(self.cgroup or "")}

    def enter(self, pid: int) -> None:
        """Move ``pid`` (a worker that has not run any code yet) into the cgroup.

        The move is checked: the kernel accepts the pid of a process that has already
        exited (a zombie) without moving anything, and what that process forked before
        it exited stays outside. A move the kernel refuses (a cgroup with controllers
        of its own, say) or one that moved nothing leaves the cell on the tree and the
        tag (:attr:`cgroup` becomes ``None``), which still find what ``pid`` started.
        """
        if self.cgroup is None:
            return
        procs = self.cgroup / "cgroup.procs"
        try:
            procs.write_text(str(pid), encoding="ascii")
            moved = str(pid) in procs.read_text(encoding="ascii").split()
        except OSError:
            moved = False
        if not moved:
            self.close()

    def kill(self, root: int | None, *, pidfd: int = -1) -> None:
        """Kill every process of the cell; a killed cell is not used again.

        With a cgroup: freeze it, kill the tree and the tag (:func:`kill_tree`: what a
        body running as root moved out of the cgroup is still below the worker and
        carries the tag), then ``cgroup.kill`` what is left inside. Without: the tree
        and the tag only.

        Args:
            root: the worker's pid if it is not yet reaped, else ``None``.
            pidfd: a pidfd of the worker (-1: none), which signals it even if its pid
                were reused (:func:`kill_tree`).

        """
        if self.cgroup is not None:
            cgroup_freeze(self.cgroup)
        kill_tree(root, self.tag, root_pidfd=pidfd)  # also what left the cgroup (as root)
        if self.cgroup is not None:
            cgroup_kill(self.cgroup)

    def close(self) -> None:
        """Kill what is left and remove the cgroup (idempotent)."""
        path, self.cgroup = self.cgroup, None
        if path is None:
            return
        cgroup_kill(path)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # still populated while the killed processes exit
                time.sleep(0.005)
