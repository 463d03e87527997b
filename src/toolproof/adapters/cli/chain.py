"""``toolproof verify``'s segment link line and ``toolproof verify --chain``.

A run that is a segment of a sealed session (docs/runs.md "Segments") has its link to
its predecessor checked by every ``verify`` (:func:`toolproof.runs.chain.check_link`);
``--chain`` verifies the whole chain from the given segment back to segment 1, one
segment at a time (:func:`toolproof.runs.chain.verify_chain`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from toolproof.adapters.cli.app import emit_json, err_console, exit_for, out_console
from toolproof.adapters.cli.summary import count
from toolproof.errors import VerificationError

if TYPE_CHECKING:
    from toolproof.runs.chain import LinkCheck, SegmentResult

__all__ = ["chain_command", "print_link", "with_link"]


def print_link(check: LinkCheck) -> None:
    """Print a segment's link line (nothing for a run that is not a segment)."""
    if check.status == "none":
        return
    if check.status == "broken":
        err_console.print(f"[bold red]FAIL[/] segment-link: {escape(check.message)}")
    elif check.status in ("absent", "unlinked"):
        out_console.print(f"[yellow]note[/] segment-link: {escape(check.message)}")
    else:
        out_console.print(f"segment-link: {escape(check.message)}")


def with_link(document: dict[str, Any], check: LinkCheck) -> dict[str, Any]:
    """``verify --json``'s document with ``segment`` (the link check) for a segment's run."""
    if check.status != "none":
        document["segment"] = check.to_json()
        document["ok"] = bool(document["ok"]) and check.ok
    return document


def chain_command(directory: Path, as_json: bool) -> None:
    """``toolproof verify RUN --chain``: verify RUN and every segment before it.

    Prints one row per segment (head first), each segment's notes (``acted-once``: an
    ``outcome_unknown`` call no person reconciled), then ``chain verified (N
    segments)`` or the first problem. Exit code 0 when the chain holds, 2 when it does not.
    """
    from toolproof.runs.chain import verify_chain
    from toolproof.verify.verifier import verify_run

    def progress(result: SegmentResult) -> None:
        if not as_json:
            index = result.link.link.index if result.link.link else 1
            name = result.run_id or result.directory.name
            line = (
                f"verified segment {index}: {name}"
                if result.verified
                else (f"segment {index}: {name} does not verify")
            )
            err_console.print(line, markup=False, highlight=False)

    chain = verify_chain(directory, verify=verify_run, on_segment=progress)
    if as_json:
        emit_json(chain.to_json())
    else:
        table = Table(title=f"verify --chain {directory.name}")
        for column in ("segment", "run", "verified", "link"):
            table.add_column(column)
        for result in chain.segments:
            index = str(result.link.link.index) if result.link.link else "-"
            table.add_row(
                index,
                result.run_id or result.directory.name,
                "yes" if result.verified else "NO",
                result.link.status,
            )
        out_console.print(table)
        for result in chain.segments:  # acted-once: an outcome_unknown call to reconcile
            for note in result.notes:
                where = f"segment {result.link.link.index}" if result.link.link else "run"
                line = f"{where} {result.run_id or result.directory.name}: {note}"
                out_console.print(f"[yellow]note[/] {escape(line)}")
        if chain.ok:
            out_console.print(f"chain verified ({count(len(chain.segments), 'segment')})")
        else:
            err_console.print(f"[bold red]FAIL[/] chain: {escape(chain.problem)}")
            out_console.print("chain verification FAILED")
    if not chain.ok:
        raise exit_for(VerificationError)
