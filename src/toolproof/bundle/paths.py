"""Relative POSIX paths confined to an artifact root (DESIGN.md section 9).

Every path a run directory names, and every path a user gives the CLI, is checked
here: relative POSIX only (no absolute path, drive, backslash, NUL, ``.`` or ``..``
segment), and, once symlinks are resolved, still inside the root.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolproof.errors import InputError

__all__ = ["check_relative_path", "confine", "path_problem"]

_DRIVE = re.compile(r"^[A-Za-z]:")


def path_problem(path: str) -> str | None:
    """Why ``path`` is not an acceptable relative POSIX path, or ``None`` when it is.

    Args:
        path: the path as written (``evidence/ab12...``).

    Returns:
        The rule it breaks, in words, or ``None``.

    """
    if not path:
        return "is empty"
    if "\x00" in path:
        return "contains a NUL byte"
    if "\\" in path:
        return "contains a backslash (paths are POSIX: use '/')"
    if path.startswith("/"):
        return "is absolute (paths are relative to the artifact root)"
    if _DRIVE.match(path):
        return "starts with a drive letter (paths are relative POSIX)"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return f"has a {segment or 'empty'!r} segment (no '.', '..' or '//')"
    return None


def check_relative_path(path: str, *, what: str = "path") -> str:
    """Return ``path`` if it is an acceptable relative POSIX path.

    Raises:
        InputError: it is not; ``fields`` has ``path`` and ``rule``.

    """
    problem = path_problem(path)
    if problem is not None:
        raise InputError(f"{what} {path!r} {problem}", path=path, rule=problem)
    return path


def confine(root: Path, path: str, *, what: str = "path") -> Path:
    """Resolve the relative POSIX ``path`` under ``root``, symlinks included, and confine it.

    Args:
        root: the artifact root (a directory).
        path: a relative POSIX path (checked with :func:`check_relative_path`).
        what: what the path names, for the error message.

    Returns:
        The resolved absolute path, inside the resolved ``root``.

    Raises:
        InputError: the path is malformed or resolves outside ``root``.

    """
    check_relative_path(path, what=what)
    base = root.resolve()
    resolved = (base / path).resolve()
    if resolved != base and base not in resolved.parents:
        rule = f"resolves outside the artifact root {base} (symlinks are followed)"
        raise InputError(f"{what} {path!r} {rule}", path=path, rule=rule)
    return resolved
