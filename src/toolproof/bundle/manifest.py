"""``manifest.json``: every file of a run directory with its size and digest.

Files are hashed by streaming them in 4 MiB blocks, each file exactly once (large
files several at a time on a thread pool); the digests a check of the manifest
computes are handed on, so later checks never hash a file again.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from toolproof.bundle.paths import path_problem
from toolproof.contract.layout import MANIFEST_FILE
from toolproof.contract.runs import Finding, Manifest, ManifestEntry, Severity, run_id_for
from toolproof.errors import InputError, validation_problem
from toolproof.identity import canonical_json, hash_digest

__all__ = [
    "BLOCK_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_ENTRIES",
    "build_manifest",
    "check_manifest",
    "entry_finding",
    "hash_file",
    "list_files",
]

BLOCK_BYTES = 4 * 1024 * 1024
"""Bytes read per block when hashing a file (4 MiB)."""
MAX_MANIFEST_ENTRIES = 100_000
"""The most files a manifest read may list; validation stops at the first entry past it."""
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""The largest ``manifest.json`` read (64 MiB); a larger one is refused by its size, unread."""
PARALLEL_MIN_BYTES = 8 * 1024 * 1024
"""Files listed larger than this (8 MiB) are hashed on a thread pool, one file per thread."""


class _BoundedManifest(Manifest):
    """:class:`Manifest` as read: at most :data:`MAX_MANIFEST_ENTRIES` files, first error stops."""

    files: Annotated[list[ManifestEntry], Field(max_length=MAX_MANIFEST_ENTRIES, fail_fast=True)]


def hash_file(path: Path | str) -> tuple[int, str]:
    """Read ``path`` once; return its size in bytes and ``sha256:<hex>``.

    A file up to one block (4 MiB) is read whole; a larger one is hashed through a
    read-only memory map (no copy into Python buffers), or streamed in 4 MiB blocks
    where the file cannot be mapped. A file truncated by another process while it is
    mapped ends the process with SIGBUS: verification fails loudly, never passes.

    Raises:
        OSError: the file cannot be read.

    """
    with open(path, "rb", buffering=0) as file:
        # ask for what the file holds (one byte more, to see it end), not a whole block:
        # a 4 MiB buffer per 1 kB file costs more than reading it
        want = min(BLOCK_BYTES, os.fstat(file.fileno()).st_size + 1)
        head = file.read(want)
        sha = hashlib.sha256(head)
        size = len(head)
        if size < want:
            return size, hash_digest(sha)
        try:
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                rest = memoryview(mapped)[size:]
                try:
                    sha.update(rest)
                    size += len(rest)
                finally:
                    rest.release()
                return size, hash_digest(sha)
        except (OSError, ValueError):
            pass  # not mappable (a pipe, some network file systems): stream instead
        buffer = bytearray(BLOCK_BYTES)
        view = memoryview(buffer)
        while True:
            count = file.readinto(view)
            if not count:
                break
            sha.update(view[:count])
            size += count
    return size, hash_digest(sha)


def list_files(directory: Path) -> tuple[list[str], list[str]]:
    """Every regular file under ``directory`` as sorted relative POSIX paths.

    Returns:
        The files, and the entries that are not regular files (symlinks, devices...),
        which a run directory must not hold.

    """
    files: list[str] = []
    odd: list[str] = []

    def walk(folder: str, prefix: str) -> None:
        # the directory's own entry types (d_type): no stat per file
        try:
            entries = os.scandir(folder)
        except OSError:
            return  # as os.walk: an unreadable folder lists nothing
        with entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, rel + "/")
                elif entry.is_file(follow_symlinks=False):
                    files.append(rel)
                else:
                    odd.append(rel)  # a symlink (to a file or a folder), a device, a socket

    walk(str(directory), "")
    return sorted(files), sorted(odd)


def build_manifest(directory: Path, known: dict[str, tuple[int, str]] | None = None) -> Manifest:
    """Hash every file of ``directory`` (but ``manifest.json``) into a :class:`Manifest`.

    Args:
        directory: the run directory being written.
        known: sizes and digests already computed while writing, by relative path.

    Raises:
        InputError: the directory holds something that is not a regular file.

    """
    files, odd = list_files(directory)
    if odd:
        raise InputError(f"run directory holds non-regular files: {', '.join(odd)}", path=odd[0])
    entries = []
    for rel in files:
        if rel == MANIFEST_FILE:
            continue
        size, digest = (known or {}).get(rel) or hash_file(directory / rel)
        entries.append(ManifestEntry(path=rel, size=size, digest=digest))
    return Manifest(run_id=run_id_for(entries), files=entries)


def _hash_all(
    directory: Path,
    entries: list[ManifestEntry],
    progress: Callable[[int], None] | None = None,
) -> list[tuple[int, str]]:
    """Size and digest of each entry's file, in order; each file is read exactly once.

    Large files go to a thread pool (reads and hashlib release the GIL).
    """
    large = [entry for entry in entries if entry.size > PARALLEL_MIN_BYTES]
    results: dict[str, tuple[int, str]] = {}
    if len(large) > 1:
        workers = min(len(large), max(2, os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            hashed = pool.map(lambda entry: hash_file(directory / entry.path), large)
            results = {entry.path: pair for entry, pair in zip(large, hashed, strict=True)}
    out = []
    for entry in entries:
        pair = results.get(entry.path) or hash_file(directory / entry.path)
        if progress is not None:
            progress(pair[0])
        out.append(pair)
    return out


def _finding(file: str, message: str, **detail: str | int) -> Finding:
    return Finding(severity=Severity.CRITICAL, file=file, message=message, detail=dict(detail))


def _size_finding(entry: ManifestEntry, size: int, how: str) -> Finding:
    return _finding(
        entry.path,
        f"{entry.path} has size {size} bytes, the manifest says {entry.size} "
        f"(truncated, appended or replaced; {how})",
    )


def _read_manifest(directory: Path) -> tuple[Manifest | None, list[Finding]]:
    path = directory / MANIFEST_FILE
    if path.is_symlink() or not path.is_file():
        return None, [
            _finding(MANIFEST_FILE, "manifest.json is missing: the run cannot be trusted")
        ]
    if (size := path.stat().st_size) > MAX_MANIFEST_BYTES:
        message = (
            f"manifest.json is {size} bytes, over the limit of {MAX_MANIFEST_BYTES} bytes; "
            "refused by its size, not read"
        )
        return None, [_finding(MANIFEST_FILE, message)]
    raw = path.read_bytes()
    try:
        bounded = _BoundedManifest.model_validate_json(raw)
        # validated as the subclass (its limit), handed on as the contract's own class
        manifest = Manifest.model_construct(
            bounded.model_fields_set,
            **{name: getattr(bounded, name) for name in Manifest.model_fields},
        )
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "too_long":
            message = (
                f"manifest.json lists more than {MAX_MANIFEST_ENTRIES} files (entry "
                f"{MAX_MANIFEST_ENTRIES} is past the limit); refused at that entry"
            )
            return None, [_finding(MANIFEST_FILE, message)]
        first = validation_problem(exc, empty="(document)")
        where = first.where
        return None, [
            _finding(MANIFEST_FILE, f"manifest.json is invalid: {where}: {first.message}")
        ]
    if canonical_json(manifest.to_json()) != raw:
        return None, [_finding(MANIFEST_FILE, "manifest.json is not canonical JSON (RFC 8785)")]
    return manifest, []


def entry_finding(entry: ManifestEntry, size: int, digest: str) -> Finding | None:
    """The finding for a listed file read whole as ``size`` bytes hashing to ``digest``.

    Returns:
        ``None`` when both are the listed ones; else a critical finding naming the
        file, what differs and what it means.

    """
    if size != entry.size:
        return _size_finding(entry, size, "its size changed while it was read")
    if digest != entry.digest:
        return _finding(
            entry.path,
            f"{entry.path} has digest {digest}, the manifest says {entry.digest} "
            "(its bytes were changed)",
        )
    return None


def check_manifest(
    directory: Path,
    *,
    defer: Collection[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Manifest | None, dict[str, str], list[Finding]]:
    """Check a run directory against its manifest (the first thing verify and replay do).

    Every listed file must exist as a regular file with the listed size and digest,
    no other file may exist, every path must be relative POSIX, and the run id must
    match the entries. The directory's name is not checked: a run's identity is its
    content, so a moved or renamed run directory still verifies (as its own run id).
    Sizes are compared first, from ``lstat``: a file whose size differs from the listed
    one is refused without reading a byte of it (a 20 GB sparse file costs no hashing);
    only files of the listed size are hashed. ``manifest.json`` itself is refused
    unread past :data:`MAX_MANIFEST_BYTES`, and at its entry
    :data:`MAX_MANIFEST_ENTRIES` (zero-based) when it lists more files.

    Args:
        directory: the run directory.
        defer: listed paths whose size is checked but whose bytes are left to the
            caller, which reads them anyway (``verify`` hashes ``trace.jsonl`` in the
            pass that parses it) and checks them with :func:`entry_finding`.
        progress: called as ``(bytes, total)`` with the size of each file once it is
            hashed, ``total`` being the size of every listed file (first with ``0``).

    Returns:
        The manifest (``None`` when unreadable), the verified digests by path (not
        those deferred), and the findings (all ``critical``), in path order.

    """
    manifest, findings = _read_manifest(directory)
    if manifest is None:
        return None, {}, findings
    files, odd = list_files(directory)
    for rel in odd:
        findings.append(_finding(rel, f"{rel} is not a regular file (symlinks are not allowed)"))
    present = set(files)
    base = str(directory)
    digests: dict[str, str] = {}
    to_hash = []
    for entry in manifest.files:
        problem = path_problem(entry.path)
        if entry.path == MANIFEST_FILE:
            problem = "lists the manifest itself (it lists every other file)"
        if problem is not None:
            findings.append(_finding(entry.path, f"manifest path {entry.path!r} {problem}"))
        elif entry.path not in present:
            findings.append(_finding(entry.path, f"{entry.path} is listed but missing"))
        elif (size := os.lstat(os.path.join(base, entry.path)).st_size) != entry.size:
            findings.append(_size_finding(entry, size, "refused by size, not read"))
        elif entry.path not in defer:
            to_hash.append(entry)
    tick = None
    if progress is not None:
        report, total = progress, sum(entry.size for entry in manifest.files)
        report(0, total)

        def tick(count: int) -> None:
            report(count, total)

    hashed = _hash_all(directory, to_hash, tick)
    for entry, (size, digest) in zip(to_hash, hashed, strict=True):
        found = entry_finding(entry, size, digest)
        if found is not None:
            findings.append(found)
        else:
            digests[entry.path] = entry.digest  # equal to what was computed; kept once
    listed = {entry.path for entry in manifest.files} | {MANIFEST_FILE}
    for rel in files:
        if rel not in listed:
            findings.append(_finding(rel, f"{rel} is not listed in the manifest (an added file)"))
    findings.sort(key=lambda finding: finding.file)
    return manifest, digests, findings
