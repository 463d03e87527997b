"""``toolproof show RUN``: the claims of a run with the exact bytes they cite.

An agent session's run (model turns recorded) is shown as a timeline first
(:mod:`toolproof.adapters.cli.timeline`): each model turn, the tool calls that
followed it, then the answer's claim with every citation and its bytes.
"""

from __future__ import annotations

import functools
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape

from toolproof.adapters.cli.app import emit_json, err_console, exit_for, out_console
from toolproof.adapters.cli.locate import refuse_live_session, resolve_run
from toolproof.adapters.cli.options import JsonOption, RootOption
from toolproof.adapters.cli.summary import count
from toolproof.adapters.cli.timeline import print_timeline
from toolproof.errors import InputError, VerificationError
from toolproof.identity import digest

if TYPE_CHECKING:
    from toolproof.bundle.evidence import RunEvidence
    from toolproof.contract.evidence import Claim, SupportRef

__all__ = [
    "CONTEXT_BYTES",
    "SHOWN_ENTRIES",
    "CallCollector",
    "call_view",
    "claim_view",
    "print_calls",
    "print_claims",
    "show_command",
]

CONTEXT_BYTES = 40
"""Bytes of context shown on each side of a cited snippet."""

SHOWN_ENTRIES = 1000
"""Tool calls (and timeline entries) ``show`` prints by default, the first ones (``--limit``)."""


@functools.cache
def _claims() -> TypeAdapter[list[Claim]]:
    """The validator of ``claims.json``, built on first use."""
    from toolproof.contract.evidence import Claim

    return TypeAdapter(list[Claim])


def _events(directory: Path) -> Iterator[dict[str, Any]]:
    """The trace's events that parse as JSON objects, read as they come (one block at a time).

    A line that is not a JSON object, or longer than the trace's line limit, is passed
    over (``verify`` names it); an unreadable trace has no events.
    """
    from toolproof.bundle.trace import TraceReader
    from toolproof.contract.layout import TRACE_FILE

    path = directory / TRACE_FILE
    if not path.is_file():
        return
    try:
        for raw in TraceReader(path).lines():
            if raw.data is None:
                continue
            try:
                event = json.loads(raw.data)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event
    except OSError:
        return


class CallCollector:
    """The tool calls of a trace, fed one event at a time: at most ``limit`` kept.

    Keeps the calls (with their results), the approval decisions awaiting their call,
    and :attr:`total`, every call counted. Memory is bounded by ``limit``.

    Args:
        limit: the most calls kept (``None``: every one).

    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.calls: list[dict[str, Any]] = []
        self.total = 0
        self._open: dict[str, dict[str, Any]] = {}
        self._decided: dict[str, dict[str, Any]] = {}  # approval_decided comes before the call

    def feed(self, event: dict[str, Any]) -> None:
        """Take the next event of the trace (a JSON object)."""
        call_id = str(event.get("call_id"))
        kind = event.get("type")
        if kind == "approval_decided":
            keys = ("decision", "who", "channel", "reason", "edited_arguments")
            self._decided[call_id] = {key: event.get(key) for key in keys}
        elif kind == "tool_called":
            self.total += 1
            decision = self._decided.pop(call_id, None)
            if self.limit is not None and len(self.calls) >= self.limit:
                return
            call = event.get("call") or {}
            entry: dict[str, Any] = {
                "call_id": call_id,
                "step": call.get("step"),
                "tool": call.get("tool"),
                "arguments": call.get("arguments"),
                "ok": None,
                "value": None,
                "failure": None,
            }
            if decision is not None:
                entry["approval"] = decision
            self._open[call_id] = entry
            self.calls.append(entry)
        elif kind == "tool_returned" and call_id in self._open:
            result = event.get("result") or {}
            self._open.pop(call_id).update(
                ok=result.get("ok"), value=result.get("value"), failure=result.get("failure")
            )


def call_view(directory: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Every tool call of a run's trace, in order, with its result.

    The trace is read once, in bounded memory (:class:`CallCollector`).

    Args:
        directory: the run directory.
        limit: the most calls returned, the first ones (``None``: every one).

    Returns:
        ``[{"call_id", "step", "tool", "arguments", "ok", "value", "failure"}]``; a call
        without a ``tool_returned`` has ``ok`` ``None``. A call an ``approve`` gate
        decided also has ``approval``: ``{"decision", "who", "channel", "reason",
        "edited_arguments"}`` of its ``approval_decided`` event (docs/approvals.md).

    """
    collector = CallCollector(limit)
    for event in _events(directory):
        collector.feed(event)
    return collector.calls


def print_calls(calls: list[dict[str, Any]], total: int | None = None) -> None:
    """Print calls as :func:`call_view` gives them: tool, arguments, and result or failure.

    ``total``: how many calls the run has, when more than those given (the heading's count).
    """
    from toolproof.adapters.html_report import approval_line

    out_console.print(f"[bold]calls[/] ({len(calls) if total is None else total})")
    for number, call in enumerate(calls, 1):
        arguments = json.dumps(call["arguments"], ensure_ascii=False, sort_keys=True)
        out_console.print(f"[bold]{number}. {escape(str(call['tool']))}[/]({escape(arguments)})")
        if "approval" in call:
            out_console.print(textwrap.indent(escape(approval_line(call["approval"])), "   "))
        if call["ok"]:
            value = json.dumps(call["value"], ensure_ascii=False, sort_keys=True)
            out_console.print(textwrap.indent(f"[green]ok[/] {escape(value)}", "   "))
        elif call["ok"] is None:
            out_console.print("   [yellow]no result recorded[/]")
        else:
            failure = call["failure"] or {}
            text = f"{failure.get('kind')}: {failure.get('message')}"
            out_console.print(f"   [red]failed[/] {escape(text)}")


class _Sources:
    """The source of each wanted evidence id, from ``evidence_registered`` events."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.found: dict[str, dict[str, Any]] = {}

    def feed(self, event: dict[str, Any]) -> None:
        if event.get("type") != "evidence_registered":
            return
        record = event.get("evidence") or {}
        if isinstance(record, dict) and isinstance(record.get("source"), dict):
            key = str(record.get("id"))
            if key in self.wanted:
                self.found.setdefault(key, record["source"])


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
    evidence: RunEvidence, support: SupportRef, source: dict[str, Any] | None = None
) -> dict[str, Any]:
    rel = evidence.path_of(support.evidence)
    present = support.evidence in evidence
    size = evidence.size(support.evidence) if present else 0
    low = max(0, support.start - CONTEXT_BYTES)  # only the snippet and its context are read
    window = evidence.read(support.evidence, low, support.end + CONTEXT_BYTES) if present else b""
    snippet = window[support.start - low : support.end - low]
    verified = support.end <= size and digest(snippet) == support.sha256
    before = window[: support.start - low]
    after = window[support.end - low :]
    if not present:
        problem = f"{rel} is missing"
    elif not verified:
        problem = f"bytes [{support.start}, {support.end}) of {rel} do not match their digest"
    else:
        problem = ""
    return {
        "problem": problem,
        "more_before": support.start - CONTEXT_BYTES > 0,
        "more_after": support.end + CONTEXT_BYTES < size,
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


def _read_claims(directory: Path) -> list[Claim]:
    from toolproof.contract.layout import CLAIMS_FILE

    path = directory / CLAIMS_FILE
    try:
        return _claims().validate_json(path.read_bytes())
    except FileNotFoundError:
        reason = "missing"
    except OSError as exc:
        reason = f"cannot be read: {exc.strerror}"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"{where}: {first['msg']}" if where else str(first["msg"])
    except InputError as exc:
        reason = str(exc)
    raise VerificationError(
        f"{path}: {reason} (rule: claims.json is the JSON list of the run's claims); "
        "run `toolproof verify` on this run",
        file=CLAIMS_FILE,
    )


def _cited(claims: list[Claim]) -> set[str]:
    return {support.evidence for claim in claims for support in claim.supports}


def _claim_entries(
    directory: Path, claims: list[Claim], sources: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    from toolproof.bundle.evidence import RunEvidence

    evidence = RunEvidence.open(directory)
    return [
        {
            "id": claim.id,
            "statement": claim.statement,
            "type": claim.type.value,
            "status": claim.status.value,
            "confidence": claim.confidence,
            "reason": claim.reason,
            "supports": [
                _support_view(evidence, support, sources.get(support.evidence))
                for support in claim.supports
            ],
        }
        for claim in claims
    ]


def claim_view(directory: Path) -> list[dict[str, Any]]:
    """Every claim of a run with each support's file, offsets, snippet and check.

    The trace is read once, in bounded memory, for the sources of the cited evidence.

    Raises:
        VerificationError: ``claims.json`` is missing or invalid.

    """
    claims = _read_claims(directory)
    sources = _Sources(_cited(claims))
    for event in _events(directory):
        sources.feed(event)
    return _claim_entries(directory, claims, sources.found)


def print_claims(claims: list[dict[str, Any]]) -> None:
    """Print claims as :func:`claim_view` gives them: statement, status, cited snippets."""
    from toolproof.adapters.html_report import describe_location

    for number, claim in enumerate(claims, 1):
        failing = any(not support["verified"] for support in claim["supports"])
        status = (
            f"[bold red]failing[/] (recorded {claim['status']})" if failing else claim["status"]
        )
        out_console.print(
            f"[bold]{number}. {escape(claim['statement'])}[/] [dim]({claim['type']},[/] "
            f"{status}[dim])[/]"
        )
        if claim["reason"]:
            out_console.print(f"   [dim]{escape(claim['reason'])}[/]")
        if claim["status"] == "validated" and not failing:
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
    run: str = typer.Argument(
        ..., help="A run directory (any path), or a run id or unique prefix of one in ROOT/runs."
    ),
    root: Path = RootOption,
    as_json: bool = JsonOption,
    html: Path | None = typer.Option(
        None,
        "--html",
        help="Also write a self-contained HTML page (verdict, claims, cited bytes) to FILE.",
        metavar="FILE",
    ),
    limit: int = typer.Option(
        SHOWN_ENTRIES,
        "--limit",
        min=0,
        help="The most tool calls (and timeline entries) shown, the first ones; 0: all.",
    ),
) -> None:
    """Show a run's claims with their cited snippets (or, without claims, its tool calls).

    An agent run with model turns is a timeline: each model turn, the tool calls after
    it, then the answer with each citation and its bytes. The run is verified first and
    the verdict printed first (``--json``: ``verification``); exit 2 when it fails.
    The trace is read as it comes, in memory bounded by ``--limit``: past it, calls are
    counted (``calls_total`` and ``timeline_total`` in ``--json``), not shown.
    """
    from toolproof.adapters.cli.timeline import TimelineCollector
    from toolproof.adapters.html_report import write_html
    from toolproof.bundle.evidence import RunEvidence
    from toolproof.verify.verifier import verify_run

    directory = resolve_run(root, run)
    refuse_live_session(directory)
    verification = verify_run(directory)
    verdict = {
        "ok": verification.ok,
        "policy": (
            verification.report.policy.value
            if verification.report is not None
            else _stored_policy(directory)
        ),
        "failures": [str(failure) for failure in verification.failures],
    }
    try:
        claims = _read_claims(directory)
    except VerificationError:
        if not as_json:  # the verdict first, then the one-line reason (the error handler's)
            _print_verdict(verdict)
        raise
    kept = limit or None
    sources, calls = _Sources(_cited(claims)), CallCollector(kept)
    timeline = TimelineCollector(RunEvidence.open(directory), kept)
    for event in _events(directory):  # one pass: the calls, the timeline, cited sources
        sources.feed(event)
        calls.feed(event)
        timeline.feed(event)
    claim_entries = _claim_entries(directory, claims, sources.found)
    turns = timeline.turns > 0
    run_id = _run_id(directory)
    if html is not None:
        write_html(html, run_id, claim_entries, verdict, calls.calls)
        err_console.print(f"wrote {html}", markup=False, highlight=False)
    if as_json:
        document: dict[str, Any] = {
            "run": run_id,
            "claims": claim_entries,
            "calls": calls.calls,
            "verification": verdict,
        }
        if len(calls.calls) < calls.total:
            document["calls_total"] = calls.total
        if turns:
            document["timeline"] = timeline.entries
            if timeline.omitted:
                document["timeline_total"] = timeline.turns + timeline.calls
        emit_json(document)
        if not verification.ok:
            raise exit_for(VerificationError)
        return
    _print_verdict(verdict)
    if turns:
        shown_turns = sum(entry["kind"] == "model_turn" for entry in timeline.entries)
        omitted = (timeline.turns - shown_turns, timeline.omitted - timeline.turns + shown_turns)
        print_timeline(timeline.entries, omitted)
        _print_omitted(timeline.omitted, "timeline entry", "timeline entries")
        out_console.print("[bold]answer[/]")
        print_claims(claim_entries)
    elif claims or not calls.total:
        print_claims(claim_entries)
    else:
        print_calls(calls.calls, calls.total)
        _print_omitted(calls.total - len(calls.calls), "tool call", "tool calls")
    problems = [s["problem"] for c in claim_entries for s in c["supports"] if not s["verified"]]
    if problems:
        err_console.print(
            f"error: {count(len(problems), 'cited snippet')} failed: {escape(problems[0])}; "
            "run `toolproof verify` on this run"
        )
    if problems or not verification.ok:
        raise exit_for(VerificationError)


def _print_omitted(omitted: int, one: str, many: str) -> None:
    if omitted:
        out_console.print(
            f"[dim]… {omitted} more {one if omitted == 1 else many} not shown (--limit; "
            "--limit 0 shows all)[/]"
        )


def _print_verdict(verdict: dict[str, Any]) -> None:
    """The first lines of ``show``: ``verified (...)`` or ``verification FAILED`` and why."""
    if verdict["ok"]:
        out_console.print(f"verified ({escape(str(verdict['policy']))} policy)")
        return
    failures = verdict["failures"]
    out_console.print(
        f"[bold red]verification FAILED[/] ({count(len(failures), 'failure')}): what follows "
        "is what the files say, not trusted; run `toolproof verify` on this run"
    )
    for failure in failures[:3]:
        out_console.print(f"  {escape(failure)}")


def _stored_policy(directory: Path) -> str:
    """The policy the run's spec names (read unverified: the manifest check failed)."""
    from toolproof.contract.layout import SPEC_FILE

    try:
        policy = json.loads((directory / SPEC_FILE).read_bytes()).get("policy", "strict")
    except (OSError, ValueError, AttributeError):
        return "unknown"
    return policy if isinstance(policy, str) else "unknown"


def _run_id(directory: Path) -> str:
    """The manifest's run id (a run's identity is its content), else the folder name."""
    from toolproof.contract.layout import MANIFEST_FILE

    try:
        run_id = json.loads((directory / MANIFEST_FILE).read_bytes()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return directory.name
    return run_id if isinstance(run_id, str) else directory.name
