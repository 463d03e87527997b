"""``toolproof show RUN``: the claims of a run with the exact bytes they cite."""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import typer
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape

from toolproof.adapters.cli.app import emit_json, err_console, fail, out_console
from toolproof.adapters.html_report import describe_location, write_html
from toolproof.contract.evidence import Claim, SupportRef, evidence_path_for
from toolproof.errors import InputError, VerificationError

__all__ = ["CONTEXT_BYTES", "claim_view", "print_claims", "show_command"]

CONTEXT_BYTES = 40
"""Bytes of context shown on each side of a cited snippet."""

_CLAIMS: TypeAdapter[list[Claim]] = TypeAdapter(list[Claim])


def _sources(directory: Path) -> dict[str, dict[str, Any]]:
    """The source of every evidence id, from the trace's ``evidence_registered`` events."""
    sources: dict[str, dict[str, Any]] = {}
    try:
        lines = (directory / "trace.jsonl").read_bytes().splitlines()
    except OSError:
        return sources
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "evidence_registered":
            record = event.get("evidence") or {}
            if isinstance(record, dict) and isinstance(record.get("source"), dict):
                sources.setdefault(str(record.get("id")), record["source"])
    return sources


def _origin(source: dict[str, Any] | None, start: int, end: int) -> dict[str, Any]:
    """Where the cited bytes come from: the document and its offsets, or the tool call."""
    if not source:
        return {}
    detail = source.get("detail") or {}
    origin: dict[str, Any] = {"kind": source.get("kind"), "step": source.get("step")}
    if source.get("call"):
        origin["call"] = source["call"]
    document_start = detail.get("document_start")
    if detail.get("document") and isinstance(document_start, int):
        origin["document"] = detail["document"]
        origin["document_start"] = document_start + start
        origin["document_end"] = document_start + end
    return origin


def _support_view(
    directory: Path, support: SupportRef, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    rel = evidence_path_for(support.evidence)
    path = directory / rel
    present = path.is_file() and not path.is_symlink()
    data = path.read_bytes() if present else b""
    snippet = data[support.start : support.end]
    verified = (
        support.end <= len(data)
        and "sha256:" + hashlib.sha256(snippet).hexdigest() == support.sha256
    )
    before = data[max(0, support.start - CONTEXT_BYTES) : support.start]
    after = data[support.end : support.end + CONTEXT_BYTES]
    if not present:
        problem = f"{rel} is missing"
    elif not verified:
        problem = f"bytes [{support.start}, {support.end}) of {rel} do not match their digest"
    else:
        problem = ""
    return {
        "problem": problem,
        "more_before": support.start - CONTEXT_BYTES > 0,
        "more_after": support.end + CONTEXT_BYTES < len(data),
        "evidence": support.evidence,
        "file": rel,
        "start": support.start,
        "end": support.end,
        "sha256": support.sha256,
        "text": snippet.decode("utf-8", errors="replace"),
        "before": before.decode("utf-8", errors="replace"),
        "after": after.decode("utf-8", errors="replace"),
        "verified": verified,
        "origin": _origin(source, support.start, support.end),
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
    sources = _sources(directory)
    return [
        {
            "id": claim.id,
            "statement": claim.statement,
            "type": claim.type.value,
            "status": claim.status.value,
            "confidence": claim.confidence,
            "reason": claim.reason,
            "supports": [
                _support_view(directory, support, sources.get(support.evidence))
                for support in claim.supports
            ],
        }
        for claim in claims
    ]


def print_claims(claims: list[dict[str, Any]]) -> None:
    """Print claims as :func:`claim_view` gives them: statement, status, cited snippets."""
    for number, claim in enumerate(claims, 1):
        out_console.print(
            f"[bold]{number}. {escape(claim['statement'])}[/] "
            f"[dim]({claim['type']}, {claim['status']})[/]"
        )
        if claim["reason"]:
            out_console.print(f"   [dim]{escape(claim['reason'])}[/]")
        if claim["status"] == "validated":
            out_console.print(f"   [dim]confidence {claim['confidence']}[/]")
        for support in claim["supports"]:
            if support["verified"]:
                mark = "[green]ok[/]"
            else:
                mark = f"[bold red]FAILED: {escape(support['problem'])}[/]"
            out_console.print(f"   {escape(describe_location(support))} {mark}")
            # Without colour (a pipe, a file) the cited bytes are bracketed instead.
            plain = not out_console.is_terminal or out_console.no_color
            left, right = ("⟦", "⟧") if plain else ("", "")
            snippet = (
                ("…" if support["more_before"] else "")
                + f"[dim]{escape(support['before'])}[/]"
                + f"[bold yellow]{left}{escape(support['text'])}{right}[/]"
                + f"[dim]{escape(support['after'])}[/]"
                + ("…" if support["more_after"] else "")
            )
            out_console.print(textwrap.indent(snippet, "     "))


def show_command(
    run: str = typer.Argument(..., help="A run id or a run directory inside --root."),
    root: Path = typer.Option(Path("."), "--root", help="The artifact root."),
    as_json: bool = typer.Option(False, "--json", help="Print one canonical JSON document."),
    html: Path | None = typer.Option(
        None, "--html", help="Also write a self-contained HTML page of the claims to FILE."
    ),
) -> None:
    """Show a run's claims with their cited snippets, files and byte offsets."""
    from toolproof.adapters.cli.runs import resolve_run

    try:
        directory = resolve_run(root, run)
        claims = claim_view(directory)
    except (InputError, VerificationError) as exc:
        raise fail(exc) from None
    if html is not None:
        write_html(html, directory.name, claims)
    if as_json:
        emit_json({"run": directory.name, "claims": claims})
        return
    print_claims(claims)
    problems = [s["problem"] for c in claims for s in c["supports"] if not s["verified"]]
    if problems:
        err_console.print(
            f"error: {len(problems)} cited snippets failed: {escape(problems[0])}; "
            "run `toolproof verify` on this run"
        )
        raise typer.Exit(2)
