"""The atomic run directory: written in a temporary directory, renamed into place.

``RunDirectoryWriter(root)`` creates ``<root>/.tmp-run-<pid>-<random>/`` (beside
``runs/``, never inside it), the run writes its files there, and
:meth:`RunDirectoryWriter.commit` writes ``manifest.json``, makes the directory durable
and renames it to ``<root>/runs/<run_id>``, so every file is on disk before the name
appears. Durable means: on Linux one ``syncfs(2)`` of the temporary directory's
filesystem for the files (one call however many evidence files the run holds; it
also flushes whatever else is pending on that filesystem, other programs' writes
included, so on a disk another program is busy writing, the commit waits for that
too: see :mod:`toolproof.bundle.durable`), elsewhere one ``fsync(2)`` per file (a run
holds a handful: its evidence is one pack and its index); then,
either way, an fsync of every folder that holds a file, deepest first. If that
directory exists already (identical work gives an identical run id), the existing
one is kept and the temporary one removed. An exception or Ctrl-C removes the
temporary directory; a process killed outright leaves it under ``<root>`` (never
under ``runs/``), and the next writer in the same root removes temporary directories
whose process is gone. An existing run with the same id is checked against its
manifest before it is reused; a damaged one is an error (:class:`VerificationError`),
never silently reused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from toolproof.bundle.durable import fsync_path, syncfs
from toolproof.bundle.manifest import build_manifest, check_manifest
from toolproof.contract.layout import MANIFEST_FILE
from toolproof.contract.runs import Manifest
from toolproof.errors import VerificationError
from toolproof.identity import canonical_json, digest

__all__ = [
    "RUNS_DIR",
    "TEMP_PREFIX",
    "CommittedRun",
    "RunDirectoryWriter",
    "pid_alive",
    "process_identity",
    "recorder_alive",
    "remove_aside",
    "write_file",
]

RUNS_DIR = "runs"
TEMP_PREFIX = ".tmp-run-"


def write_file(path: Path, data: bytes, *, sync: bool = True) -> tuple[int, str]:
    """Create ``path`` (it must not exist) with ``data``; return size and digest.

    Args:
        path: the file to create.
        data: its bytes.
        sync: fsync the file (False for scratch files nobody must find after a crash).

    Raises:
        OSError: the file cannot be written; ``filename`` names it.

    """
    try:
        with path.open("xb") as file:
            file.write(data)
            if sync:
                file.flush()
                os.fsync(file.fileno())
    except OSError as exc:
        if exc.filename is None:  # a write or fsync error: name the file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return len(data), digest(data)


def _sync_files(directory: Path, names: list[str]) -> None:
    """Make every file of the run durable, then fsync every folder that holds one.

    The files: one ``syncfs(2)`` of ``directory``'s filesystem where the platform has
    it (Linux), else one fsync per file. Never ``sync(2)``, which would flush every
    filesystem of the machine.

    Raises:
        OSError: a sync failed.

    """
    folders = {directory}
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        whole = syncfs(fd)
    finally:
        os.close(fd)
    for name in names:
        path = directory / name
        if not whole:
            fsync_path(path)
        folders.add(path.parent)
    for folder in sorted(folders, reverse=True):  # deepest first, the run directory last
        fsync_path(folder)


def process_identity(pid: object) -> str | None:
    """Who ``pid`` is now: ``"<boot id>/<start time>"``, or ``None`` where that is unknown.

    A pid alone names a process only while it runs: after a container restart the
    recorder's pid (often 1) names another process. The kernel's boot id
    (``/proc/sys/kernel/random/boot_id``) and the process's start time in clock ticks
    after boot (``/proc/<pid>/stat`` field 22, proc(5)) name one process for good.

    Returns:
        The identity on Linux for a running ``pid``; ``None`` elsewhere or when it is gone.

    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after "pid (comm)": state is field 3
    return f"{boot}/{fields[19]}" if len(fields) > 19 else None


def recorder_alive(pid: object, identity: object) -> bool:
    """Whether the process that wrote ``pid`` and ``identity`` still runs.

    ``identity`` is what :func:`process_identity` gave when the recorder started;
    ``None`` (a recording from before it was kept) falls back to :func:`pid_alive`.
    """
    if not pid_alive(pid):
        return False
    if not isinstance(identity, str):
        return True
    now = process_identity(pid)
    return now is None or now == identity


def pid_alive(pid: object) -> bool:
    """Whether ``pid`` (a positive int) names a running process (``kill(pid, 0)``)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(root: Path) -> None:
    for entry in root.glob(TEMP_PREFIX + "*"):
        pid_text = entry.name.removeprefix(TEMP_PREFIX).split("-", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


@dataclass(frozen=True)
class CommittedRun:
    """A run directory in place.

    Attributes:
        run_id: the run id (``run_<hex>``).
        path: ``<root>/runs/<run_id>``.
        reused: True when an identical run was already there and was kept.
        manifest: the manifest.

    """

    run_id: str
    path: Path
    reused: bool
    manifest: Manifest


class RunDirectoryWriter:
    """Writes one run directory atomically (see the module docstring).

    Args:
        root: the artifact root; created if missing.

    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        _remove_stale(self.root)
        prefix = f"{TEMP_PREFIX}{os.getpid()}-"
        self.temp = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))
        self.known: dict[str, tuple[int, str]] = {}
        self._done = False

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write the file ``name`` (relative POSIX) into the run, fsynced."""
        self.known[name] = write_file(self.temp / name, data)

    def write_json(self, name: str, value: Any) -> None:
        """Write ``value`` (a model with ``to_json`` or plain JSON) as canonical JSON bytes."""
        plain = value.to_json() if hasattr(value, "to_json") else value
        self.write_bytes(name, canonical_json(plain))

    def record(self, name: str, size: int, file_digest: str) -> None:
        """Record the size and digest of a file written by someone else (trace, evidence index)."""
        self.known[name] = (size, file_digest)

    def commit(self, announce: Callable[[str], None] | None = None) -> CommittedRun:
        """Write the manifest and rename the directory to ``<root>/runs/<run_id>``.

        Args:
            announce: called with the run id once the manifest is durable, before the
                rename (a live session's finalize records there which run it commits).

        Returns:
            The run in place (``reused`` when an identical run already existed).

        Raises:
            VerificationError: a run with the same id exists but fails its manifest check.

        """
        manifest = build_manifest(self.temp, self.known)
        write_file(self.temp / MANIFEST_FILE, canonical_json(manifest.to_json()))
        _sync_files(self.temp, [entry.path for entry in manifest.files])  # the folder too
        if announce is not None:
            announce(manifest.run_id)
        runs = self.root / RUNS_DIR
        runs.mkdir(exist_ok=True)
        target = runs / manifest.run_id
        reused = False
        if target.exists():
            reused = True
        else:
            try:
                os.rename(self.temp, target)
            except OSError:
                if not target.exists():
                    raise
                reused = True
        if reused:
            shutil.rmtree(self.temp, ignore_errors=True)
            self._done = True
            _, _, findings = check_manifest(target)
            if findings:
                first = findings[0]
                raise VerificationError(
                    f"runs/{manifest.run_id} already exists but fails its manifest check "
                    f"({first.file}: {first.message}); move it away and run again",
                    file=first.file,
                    check="manifest",
                )
        fsync_path(runs)
        self._done = True
        return CommittedRun(manifest.run_id, target, reused, manifest)

    def discard(self) -> None:
        """Remove the temporary directory (nothing lands under ``runs/``)."""
        if not self._done:
            shutil.rmtree(self.temp, ignore_errors=True)
            self._done = True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()


def remove_aside(directory: Path) -> None:
    """Remove ``directory`` (and all it holds), renamed aside first: all of it or none.

    It is renamed ``.<name>.discarded`` (one atomic rename) before it is emptied, so a
    process killed while removing it leaves no half-removed directory under its name,
    only a hidden one that the next removal of that name clears. Errors are ignored (a
    directory already gone is removed).
    """
    doomed = directory.with_name(f".{directory.name}.discarded")
    shutil.rmtree(doomed, ignore_errors=True)  # a kill's leftover
    try:
        os.replace(directory, doomed)
    except OSError:  # gone already, or cannot be renamed: removed in place
        doomed = directory
    shutil.rmtree(doomed, ignore_errors=True)
