"""The sandbox's seccomp filter, compiled by libseccomp (through ctypes).

A path-named unix socket is a file, and a read-only bind mount does not stop a
``connect`` to it: without this filter a sandboxed body could reach a database or a
container engine through its socket under ``/run``. The filter makes
``socket(AF_UNIX, ...)`` fail with ``EACCES`` (``socketpair``, which connects only the
two ends it creates, stays allowed, and so does a unix socket the sandbox was handed)
and ``io_uring_setup`` fail with ``EPERM`` (io_uring opens sockets without the
``socket`` system call). Other architectures' system calls (a 32-bit ``socketcall``)
kill the process: libseccomp's filter admits the native architecture only.

libseccomp (``libseccomp2``, in every Debian install) writes the BPF program; bubblewrap
loads it (``--seccomp FD``) right before it runs the worker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
from pathlib import Path

__all__ = ["write_filter"]

_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_CMP_EQ = 4


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise OSError(
            f"libseccomp ({name}) cannot be loaded: {exc} (install Debian's libseccomp2)"
        ) from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def write_filter(path: Path) -> None:
    """Write the sandbox's BPF program to ``path`` (for ``bwrap --seccomp FD``).

    Raises:
        OSError: libseccomp is missing or refused a rule (the message says which).

    """
    lib = _library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError("libseccomp could not start a filter (seccomp_init)")
    try:
        rules = [
            ("socket", _ACT_ERRNO | errno.EACCES, [_ArgCmp(0, _CMP_EQ, socket.AF_UNIX, 0)]),
            ("io_uring_setup", _ACT_ERRNO | errno.EPERM, []),
        ]
        for name, action, args in rules:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            array = (_ArgCmp * max(len(args), 1))(*args)
            done = lib.seccomp_rule_add_array(ctx, action, number, len(args), array)
            if done != 0:
                raise OSError(f"libseccomp refused the rule for {name}: {os.strerror(-done)}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            done = lib.seccomp_export_bpf(ctx, fd)
        finally:
            os.close(fd)
        if done != 0:
            raise OSError(f"libseccomp could not write the filter: {os.strerror(-done)}")
    finally:
        lib.seccomp_release(ctx)
