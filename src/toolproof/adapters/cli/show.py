"""``toolproof show RUN``: the claims of a run with the exact bytes they cite."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import typer
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape

from toolproof.adapters.cli.app import emit_json, fail, out_console
from toolproof.contract.evidence import Claim, SupportRef, evidence_path_for
from toolproof.errors import InputError, VerificationError

__all__ = ["CONTEXT_BYTES", "claim_view", "show_command"]

CONTEXT_BYTES = 40
"""Bytes of context shown on each side of a cited snippet."""

_CLAIMS: TypeAdapter[list[Claim]] = TypeAdapter(list[Claim])


def _support_view(directory: Path, support: SupportRef) -> dict[str, Any]:
    rel = evidence_path_for(support.evidence)
    path = directory / rel
    data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
    snippet = data[support.start : support.end]
    verified = (
        support.end <= len(data)
        and "sha256:" + hashlib.sha256(snippet).hexdigest() == support.sha256
    )
    before = data[max(0, support.start - CONTEXT_BYTES) : support.start]
    after = data[support.end : support.end + CONTEXT_BYTES]
    return {
        "evidence": support.evidence,
        "file": rel,
        "start": support.start,
        "end": support.end,
        "sha256": support.sha256,
        "text": snippet.decode("utf-8", errors="replace"),
        "before": before.decode("utf-8", errors="replace"),
        "after": after.decode("utf-8", errors="replace"),
        "verified": verified,
    }


def claim_view(directory: Path) -> list[dict[str, Any]]:
    """Every claim of a run with each support's file, offsets, snippet and check.

    Raises:
        VerificationError: ``claims.json`` is missing or invalid.

    """
    try:
        claims = _CLAIMS.validate_json((directory / "claims.json").read_bytes())
    except (OSError, ValidationError, InputError) as exc:
        raise VerificationError(
            f"{directory}: claims.json is missing or invalid ({type(exc).__name__}); "
            "run `toolproof verify` on it",
            file="claims.json",
        ) from None
    return [
        {
            "id": claim.id,
            "statement": claim.statement,
            "type": claim.type.value,
            "status": claim.status.value,
            "reason": claim.reason,
            "supports": [_support_view(directory, support) for support in claim.supports],
        }
        for claim in claims
    ]


def show_command(
    run: str = typer.Argument(..., help="A run id or a run directory inside --root."),
    root: Path = typer.Option(Path("."), "--root", help="The artifact root."),
    as_json: bool = typer.Option(False, "--json", help="Print one canonical JSON document."),
) -> None:
    """Show a run's claims with their cited snippets, files and byte offsets."""
    from toolproof.adapters.cli.runs import resolve_run

    try:
        directory = resolve_run(root, run)
        claims = claim_view(directory)
    except (InputError, VerificationError) as exc:
        raise fail(exc) from None
    if as_json:
        emit_json({"run": directory.name, "claims": claims})
        return
    for number, claim in enumerate(claims, 1):
        out_console.print(
            f"[bold]{number}. {escape(claim['statement'])}[/] "
            f"[dim]({claim['type']}, {claim['status']})[/]"
        )
        if claim["reason"]:
            out_console.print(f"   [dim]{escape(claim['reason'])}[/]")
        for support in claim["supports"]:
            mark = "[green]ok[/]" if support["verified"] else "[bold red]MISMATCH[/]"
            out_console.print(f"   {support['file']} [{support['start']}, {support['end']}) {mark}")
            out_console.print(
                f"     [dim]…{escape(support['before'])}[/][bold yellow]"
                f"{escape(support['text'])}[/][dim]{escape(support['after'])}…[/]"
            )
    if any(not s["verified"] for c in claims for s in c["supports"]):
        raise typer.Exit(2)
