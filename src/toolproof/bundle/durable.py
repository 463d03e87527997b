"""Making written files durable: ``fsync(2)`` of a file or folder, ``syncfs(2)`` of a filesystem.

Two ways to put a set of freshly written files on disk:

* one ``fsync(2)`` per file and per folder that gained an entry: exact (only those
  files are flushed), but each is a disk flush, so the cost grows with the number of
  files (on ext4 under load, hundreds of microseconds to milliseconds each);
* one ``syncfs(2)`` of the filesystem holding them (Linux): one call whatever the
  number of files, but it flushes *every* dirty page and inode of that filesystem,
  other programs' pending writes included, so on a disk another program is filling
  it can take as long as that program's backlog. It never touches other filesystems
  (unlike the machine-wide ``sync(2)``, which nothing here calls).

:func:`syncfs` is the second where the platform has it and says so when it has not,
so callers fall back to the first (:func:`fsync_path`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["find_syncfs", "fsync_path", "syncfs"]


def find_syncfs() -> Callable[[int], None] | None:
    """``syncfs(2)`` of the filesystem holding an open fd, or ``None`` where there is none.

    ``os.syncfs`` when Python has it, else the C library's ``syncfs`` on Linux (glibc
    and musl have it since 2011). The function returned raises ``OSError`` on failure.
    """
    native = getattr(os, "syncfs", None)
    if native is not None:
        return native  # type: ignore[no-any-return]
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int

    def call(fd: int) -> None:
        if function(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return call


_SYNCFS = find_syncfs()
"""This platform's ``syncfs(2)``, found once (``None``: there is none)."""


def syncfs(fd: int) -> bool:
    """Flush the whole filesystem holding the open ``fd`` to disk, where the platform can.

    Returns:
        True when it was flushed; False when this platform has no ``syncfs(2)`` (the
        caller must fsync what it wrote, :func:`fsync_path`).

    Raises:
        OSError: the flush failed (an I/O error reported by the filesystem).

    """
    function = _SYNCFS
    if function is None:
        return False
    function(fd)
    return True


def fsync_path(path: Path | str) -> None:
    """``fsync(2)`` one file or folder by path (opened read-only, closed after).

    Raises:
        OSError: it cannot be opened or the fsync failed.

    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
