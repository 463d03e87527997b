"""A self-contained HTML page of a run's claims and the exact bytes they cite.

No script, no external resource: one file with inline CSS that opens anywhere.
Every text is HTML-escaped; cited snippets are ``<mark>``-ed between their context.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from html import escape as _html_escape
from pathlib import Path
from typing import Any

from toolproof.errors import InputError

__all__ = ["approval_line", "describe_location", "render_html", "write_html"]

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.3rem}.run{color:#666;font:13px monospace}
.claim{border:1px solid #ddd;border-radius:6px;padding:.8rem 1rem;margin:1rem 0}
.statement{font-weight:600}.meta{color:#666;font-size:13px}
.validated{color:#17612e}.insufficient_evidence{color:#8a5a00}.unvalidated{color:#555}
.support{margin:.6rem 0 0 1rem}.where{font:12px monospace;color:#444}
.bad{color:#b00020;font-weight:700}.ok{color:#17612e}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.5rem;border-radius:4px;margin:.2rem 0}
mark{background:#ffe066;padding:0 1px}
.verdict{border-radius:6px;padding:.6rem 1rem;font-weight:600}
.verdict.passed{background:#e6f4ea;color:#17612e}.verdict.failed{background:#fde7e9;color:#b00020}
.failing{color:#b00020;font-weight:700}
.ctl{unicode-bidi:isolate}
.ctl::before{content:"[" attr(data-cp) "]";color:#b00020;font:11px monospace}
"""

_CONTROLS = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
"""Bidirectional controls and invisible marks: shown, never obeyed (``\u202eevil`` is
not rendered as "live")."""


def _control(match: re.Match[str]) -> str:
    point = f"U+{ord(match.group()):04X}"
    return f"<span class='ctl' data-cp='{point}' title='{point}'>{match.group()}</span>"


def escape(text: str) -> str:
    """HTML-escape ``text``; each bidi control or invisible mark is kept, isolated and labelled.

    The page's text stays the run's exact text; a control character sits in a span that
    isolates it (CSS ``unicode-bidi: isolate``) and shows its code point before it.
    """
    return _CONTROLS.sub(_control, _html_escape(text))


def describe_location(support: dict[str, Any]) -> str:
    """``<evidence file> [start, end) = <document> [start, end)`` (or ``= result of call ...``)."""
    origin = support.get("origin") or {}
    text = f"{support['file']} [{support['start']}, {support['end']})"
    if "document" in origin:
        text += f" = {origin['document']} [{origin['document_start']}, {origin['document_end']})"
    elif "call" in origin:
        text += f" = result of call {origin['call']} (step {origin['step']})"
    return text


def _verdict(verdict: dict[str, Any]) -> str:
    """The verification verdict block: outcome, policy and every failure."""
    ok = bool(verdict.get("ok"))
    outcome = "passed" if ok else "failed"
    policy = escape(str(verdict.get("policy") or "unknown"))
    text = "verified" if ok else "verification FAILED"
    parts = [f"<div class='verdict {outcome}'>{text} ({policy} policy)"]
    failures = [str(item) for item in verdict.get("failures") or []]
    if failures:
        parts.append("<ul>" + "".join(f"<li>{escape(item)}</li>" for item in failures) + "</ul>")
    parts.append("</div>")
    return "".join(parts)


def approval_line(approval: dict[str, Any]) -> str:
    """One line for an ``approve`` gate's decision of a call (docs/approvals.md).

    Args:
        approval: ``{"decision", "who", "channel", "reason", "edited_arguments"}``, as
            ``show --json`` gives a call's ``approval``.

    Returns:
        ``approval: approve_with_edits by ada (cli): no force; the body ran with {...}``
        (the reason and the edited arguments only when recorded).
    """
    line = (
        f"approval: {approval.get('decision')} by {approval.get('who')} ({approval.get('channel')})"
    )
    if approval.get("reason"):
        line += f": {approval['reason']}"
    if approval.get("edited_arguments") is not None:
        edited = json.dumps(approval["edited_arguments"], ensure_ascii=False, sort_keys=True)
        line += f"; the body ran with {edited}"
    return line


def _calls(calls: list[dict[str, Any]]) -> str:
    """The tool calls of a run without claims: tool, arguments, and result or failure."""
    parts = [f"<h2>Calls ({len(calls)})</h2>"]
    for number, call in enumerate(calls, 1):
        arguments = json.dumps(call.get("arguments"), ensure_ascii=False, sort_keys=True)
        parts.append("<div class='claim'>")
        parts.append(
            f"<div class='statement'>{number}. {escape(str(call.get('tool')))}"
            f"({escape(arguments)})</div>"
        )
        if call.get("approval"):
            parts.append(f"<div class='meta'>{escape(approval_line(call['approval']))}</div>")
        if call.get("ok"):
            value = json.dumps(call.get("value"), ensure_ascii=False, sort_keys=True)
            parts.append(
                f"<div class='meta'><span class='ok'>ok</span></div><pre>{escape(value)}</pre>"
            )
        elif call.get("ok") is None:
            parts.append("<div class='meta'><span class='bad'>no result recorded</span></div>")
        else:
            failure = call.get("failure") or {}
            text = f"{failure.get('kind')}: {failure.get('message')}"
            parts.append(f"<div class='meta'><span class='bad'>failed</span> {escape(text)}</div>")
        parts.append("</div>")
    return "".join(parts)


def render_html(
    run_id: str,
    claims: list[dict[str, Any]],
    verdict: dict[str, Any],
    calls: list[dict[str, Any]] | None = None,
) -> str:
    """Render the page: the verification verdict first, then each claim and its supports.

    A run without claims (a ``toolproof call --record`` or ``serve --record`` run) shows
    its tool calls instead, as ``toolproof show`` prints them.

    Args:
        run_id: the run's id, shown in the title.
        claims: claims as ``toolproof show --json`` gives them (statement, type, status,
            confidence, reason, supports with file, offsets, text, context and origin).
        verdict: ``{"ok": bool, "policy": str, "failures": [str, ...]}``, the outcome of
            ``toolproof verify`` on the run.
        calls: the call view (``show --json``'s ``calls``: tool, arguments, ok, value,
            failure), shown when there are no claims.

    Returns:
        The HTML document as a string. A claim with a support whose bytes fail their
        digest is shown as ``failing``, whatever its recorded status.
    """
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>claims of {escape(run_id)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Claims</h1><p class='run'>{escape(run_id)}</p>",
        _verdict(verdict),
    ]
    if not claims:
        parts.append(_calls(calls) if calls else "<p class='meta'>No claims.</p>")
    for number, claim in enumerate(claims, 1):
        status = str(claim["status"])
        failing = any(not support["verified"] for support in claim["supports"])
        parts.append("<div class='claim'>")
        parts.append(f"<div class='statement'>{number}. {escape(str(claim['statement']))}</div>")
        if failing:
            shown = f"<span class='failing'>failing</span> (recorded {escape(status)})"
        else:
            shown = f"<span class='{escape(status)}'>{escape(status)}</span>"
        meta = f"{escape(str(claim['type']))}, {shown}"
        if status == "validated" and not failing:
            meta += f", confidence {escape(str(claim.get('confidence')))}"
        parts.append(f"<div class='meta'>{meta}</div>")
        if claim.get("reason"):
            parts.append(f"<div class='meta'>{escape(str(claim['reason']))}</div>")
        for support in claim["supports"]:
            mark = (
                "<span class='ok'>bytes verified</span>"
                if support["verified"]
                else f"<span class='bad'>FAILED: {escape(str(support.get('problem', '')))}</span>"
            )
            parts.append("<div class='support'>")
            parts.append(f"<div class='where'>{escape(describe_location(support))} — {mark}</div>")
            lead = "…" if support.get("more_before") else ""
            tail = "…" if support.get("more_after") else ""
            parts.append(
                f"<pre>{lead}{escape(support['before'])}<mark>{escape(support['text'])}</mark>"
                f"{escape(support['after'])}{tail}</pre>"
            )
            parts.append("</div>")
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_html(
    path: Path,
    run_id: str,
    claims: list[dict[str, Any]],
    verdict: dict[str, Any],
    calls: list[dict[str, Any]] | None = None,
) -> None:
    """Write :func:`render_html` to ``path`` atomically (temporary file, then rename).

    Args:
        path: the page's file; its folder must exist and it must not be a folder.
        run_id: the run's id, shown under the heading.
        claims: the claim view (``show --json``'s ``claims``).
        verdict: ``{"ok", "policy", "failures"}`` of the run's verification.
        calls: the call view, shown when there are no claims (:func:`render_html`).

    Raises:
        InputError: ``path`` is a folder, or its folder does not exist (nothing written).

    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--html {path}: is a folder; give the page's file name (e.g. run.html)")
    if not path.parent.is_dir():
        raise InputError(f"--html {path}: folder {path.parent} does not exist")
    data = render_html(run_id, claims, verdict, calls).encode("utf-8")
    handle, temp = tempfile.mkstemp(prefix=".html-", dir=path.parent or Path("."))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # a page to share, not a secret (mkstemp makes 0600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
