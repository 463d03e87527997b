"""Naming a run on the command line: a directory anywhere, or a run id (prefix) in a root."""

from __future__ import annotations

from pathlib import Path

from toolproof.errors import InputError

__all__ = ["refuse_live_session", "resolve_run"]


def resolve_run(root: Path, run: str) -> Path:
    """The run directory ``run`` names.

    ``run`` is, in this order: a path to a directory (absolute, or relative to the
    current directory, ``..`` allowed: it is the user's own path, not one read from a
    bundle); a path relative to ``root`` (``runs/run_...``, ``sessions/...``); or a run
    id or unique prefix of one (``run_8f55ea39``), looked up in ``root/runs``.

    Args:
        root: the artifact root (``--root``).
        run: what the user typed.

    Returns:
        The run directory, resolved to an absolute path.

    Raises:
        InputError: ``run`` names a file (``bin.dat is a file, not a run directory``),
            nothing matches, or a prefix matches several runs (they are listed).

    """
    from toolproof.runs.listing import RUN_PREFIX_RE, find_runs

    given = Path(run)
    candidates = [given] if given.is_absolute() else [given, root / given]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    for candidate in candidates:
        if candidate.exists():
            raise InputError(
                f"{candidate} is a file, not a run directory",
                path=str(candidate),
                rule="not a directory",
            )
    if not RUN_PREFIX_RE.match(run.removesuffix("…").removesuffix("...")):
        # with the default root ".", root / given is given itself: name it once
        where = " nor ".join(dict.fromkeys(str(candidate) for candidate in candidates))
        raise InputError(
            f"run {run!r}: no directory at {where}, and it is not a run id "
            "(run_ followed by lowercase hex)",
            path=run,
            rule="not found",
        )
    found = find_runs(root, run)
    runs_dir = root / "runs"
    if not found:
        raise InputError(
            f"run {run!r}: no run in {runs_dir} has this id or prefix "
            f"(list them: toolproof runs list --root {root})",
            path=run,
            rule="not found",
        )
    if len(found) > 1:
        names = ", ".join(directory.name for directory in found)
        raise InputError(
            f"run {run!r} is ambiguous: {len(found)} runs in {runs_dir} start with it "
            f"({names}); give more of the id",
            path=run,
            rule="ambiguous prefix",
        )
    return found[0].resolve()


def refuse_live_session(directory: Path) -> None:
    """Refuse a live session directory (``session.json``, no manifest yet) as a run.

    Raises:
        InputError: ``directory`` holds ``session.json`` and no ``manifest.json``: it is
            a session still recording, or one a crash left (docs/durability.md).

    """
    from toolproof.contract.layout import MANIFEST_FILE, SESSION_FILE

    if (directory / SESSION_FILE).is_file() and not (directory / MANIFEST_FILE).is_file():
        raise InputError(
            f"{directory} is a live session directory, not a run (it holds session.json and "
            f"no manifest.json); recover it into a run: toolproof verify {directory} --recover",
            path=str(directory),
            rule="live session",
        )
