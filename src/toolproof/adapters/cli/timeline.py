"""An agent run as a timeline: each model turn, the tool calls after it, then the answer.

:func:`timeline_view` reads the trace in order: a ``model`` step (its ``model_turn``
event and the request and response evidence) or a ``call`` step (its call and
result, with the id the model gave the call and the turn that asked for it, when
recorded). A model turn is summarised from its response bytes: the tool calls it asked
for, or the start of its text, for pydantic-ai's ``ModelResponse``, the Agents SDK's
output items and an OpenAI-style chat completion; other bytes show their first
characters. ``toolproof show`` prints it before the answer's claims.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from toolproof.adapters.cli.app import out_console
from toolproof.adapters.cli.summary import count
from toolproof.errors import VerificationError

if TYPE_CHECKING:
    from toolproof.bundle.evidence import RunEvidence

__all__ = [
    "PREVIEW_CHARS",
    "TimelineCollector",
    "print_timeline",
    "timeline_view",
    "turn_summary",
]

PREVIEW_CHARS = 80
"""Characters of a text or a value shown in a timeline line."""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _said(text: str) -> str:
    """``says "…"``: the start of a text as a JSON string, non-ASCII kept as it is (not escaped)."""
    return f"says {json.dumps(_short(text), ensure_ascii=False)}"


def _pydantic_ai(value: dict[str, Any]) -> list[str]:
    out = []
    for part in value.get("parts") or []:
        if not isinstance(part, dict):
            continue
        if part.get("part_kind") == "tool-call":
            out.append(f"calls {part.get('tool_name')}")
        elif part.get("part_kind") == "text":
            out.append(_said(str(part.get("content", ""))))
    return out


def _agents(value: dict[str, Any]) -> list[str]:
    out = []
    for item in value.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            out.append(f"calls {item.get('name')}")
        elif item.get("type") == "message":
            text = " ".join(
                str(c.get("text", "")) for c in item.get("content") or [] if isinstance(c, dict)
            )
            out.append(_said(text))
    return out


def _chat(value: dict[str, Any]) -> list[str]:
    out = []
    for choice in value.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                out.append(f"calls {(call.get('function') or {}).get('name')}")
        if message.get("content"):
            out.append(_said(str(message["content"])))
    return out


def turn_summary(source: str, response: bytes) -> str:
    """What a model turn's response did, in one line (see the module docstring).

    Args:
        source: the turn's recorder (``pydantic-ai``, ``openai-agents``, ``http``).
        response: the recorded response bytes.

    Returns:
        ``"calls read_file, calls lookup"``, ``'says "It is …"'``, or the bytes' start.

    """
    try:
        value = json.loads(response)
    except ValueError:
        return _short(response.decode("utf-8", errors="replace"))
    if isinstance(value, dict):
        shape = {"pydantic-ai": _pydantic_ai, "openai-agents": _agents}.get(source, _chat)
        said = shape(value)
        if said:
            return ", ".join(said)
    return _short(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _read(evidence: RunEvidence, record: dict[str, Any] | None) -> bytes:
    key = str((record or {}).get("id", ""))
    try:
        return evidence.read(key) if key in evidence else b""
    except (OSError, KeyError, VerificationError):  # verify reports a damaged pack
        return b""


def _call_label(step: str) -> str:
    number = step.removeprefix("call-")
    return f"call_{int(number)}" if number.isdigit() else step


def _turn_entry(
    stored: RunEvidence, event: dict[str, Any], evidence: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    request = evidence.get(str(event.get("request")))
    response = evidence.get(str(event.get("response")))
    data = _read(stored, response)
    detail = event.get("detail") or {}
    entry = {
        "kind": "model_turn",
        "step": event.get("step"),
        "event": event.get("idx"),
        "source": event.get("source"),
        "model": event.get("model"),
        "request": {"file": (request or {}).get("path"), "size": (request or {}).get("size")},
        "response": {"file": (response or {}).get("path"), "size": (response or {}).get("size")},
        "status": detail.get("status"),
        "summary": turn_summary(str(event.get("source")), data),
    }
    stream = detail.get("stream")
    if isinstance(stream, dict) and isinstance(stream.get("chunks"), list):
        entry["chunks"] = len(stream["chunks"])  # a streamed turn: how many chunks arrived
    return entry


class TimelineCollector:
    """The timeline of a trace, fed one event at a time: at most ``limit`` entries kept.

    What it keeps is bounded by ``limit``: the entries, the evidence records registered
    before the last kept entry (a model turn's request and response come before it),
    and the calls awaiting their result. Past the limit it only counts (:attr:`turns`,
    :attr:`calls`).

    Args:
        stored: the run's evidence (a turn's response bytes are read for its summary).
        limit: the most entries kept (``None``: every one).

    """

    def __init__(self, stored: RunEvidence, limit: int | None = None) -> None:
        self.stored = stored
        self.limit = limit
        self.entries: list[dict[str, Any]] = []
        self.turns = 0
        self.calls = 0
        self._evidence: dict[str, dict[str, Any]] = {}
        self._open: dict[str, dict[str, Any]] = {}

    def _full(self) -> bool:
        return self.limit is not None and len(self.entries) >= self.limit

    def feed(self, event: dict[str, Any]) -> None:
        """Take the next event of the trace (a JSON object)."""
        kind = event.get("type")
        if kind == "evidence_registered" and isinstance(event.get("evidence"), dict):
            if not self._full():
                self._evidence[str(event["evidence"].get("id"))] = event["evidence"]
        elif kind == "model_turn":
            self.turns += 1
            if not self._full():
                self.entries.append(_turn_entry(self.stored, event, self._evidence))
        elif kind == "tool_called":
            self.calls += 1
            if self._full():
                return
            call = event.get("call") or {}
            entry: dict[str, Any] = {
                "kind": "call",
                "step": event.get("step"),
                "event": event.get("idx"),
                "call": _call_label(str(event.get("step"))),
                "model_call_id": event.get("model_call_id"),
                "model_turn": event.get("model_turn"),
                "tool": call.get("tool"),
                "arguments": call.get("arguments"),
                "ok": None,
                "value": None,
                "failure": None,
            }
            self._open[str(event.get("call_id"))] = entry
            self.entries.append(entry)
        elif kind == "tool_returned":
            opened = self._open.pop(str(event.get("call_id")), None)
            if opened is not None:
                result = event.get("result") or {}
                opened.update(
                    ok=result.get("ok"), value=result.get("value"), failure=result.get("failure")
                )

    @property
    def omitted(self) -> int:
        """Entries past the limit, not kept."""
        return self.turns + self.calls - len(self.entries)


def timeline_view(
    directory: Path, events: Iterable[dict[str, Any]], limit: int | None = None
) -> list[dict[str, Any]]:
    """The model turns and tool calls of a run's trace, in order.

    Args:
        directory: the run directory (the evidence files are read from it).
        events: the trace's events as JSON objects (any iterable: read as it goes).
        limit: the most entries returned (``None``: every one); memory is bounded by it
            (:class:`TimelineCollector`).

    Returns:
        ``{"kind": "model_turn", "step", "event", "source", "model", "request",
        "response", "status", "summary"}`` (a streamed turn also ``"chunks"``, how many
        arrived) and ``{"kind": "call", "step", "event",
        "call", "model_call_id", "model_turn", "tool", "arguments", "ok", "value",
        "failure"}`` entries; ``call`` is the ``call_N`` an answer cites it by,
        ``model_call_id`` the id the model gave it (an answer may cite it by that too)
        and ``model_turn`` the step of the turn that asked for it (``None`` when not
        recorded).

    """
    from toolproof.bundle.evidence import RunEvidence

    collector = TimelineCollector(RunEvidence.open(directory), limit)
    for event in events:
        collector.feed(event)
    return collector.entries


def timeline_heading(entries: list[dict[str, Any]], omitted: tuple[int, int] = (0, 0)) -> str:
    """``timeline (1 model turn, 2 tool calls)``: the counts of :func:`timeline_view` entries.

    ``omitted``: the model turns and tool calls past the shown entries, counted too.
    """
    turns = sum(entry["kind"] == "model_turn" for entry in entries)
    calls = len(entries) - turns + omitted[1]
    return f"timeline ({count(turns + omitted[0], 'model turn')}, {count(calls, 'tool call')})"


def print_timeline(entries: list[dict[str, Any]], omitted: tuple[int, int] = (0, 0)) -> None:
    """Print :func:`timeline_view` entries: each turn, the calls under it, indented.

    A call shows both its ids, ``call_N [<model call id>]`` (the second when the model's
    was recorded), and, when the turn that asked for it is not the one printed above
    it, ``(asked by model turn K)``.
    """
    heading = timeline_heading(entries, omitted)
    out_console.print(f"[bold]timeline[/]{escape(heading.removeprefix('timeline'))}")
    number = 0
    numbers: dict[str, int] = {}
    for entry in entries:
        if entry["kind"] == "model_turn":
            number += 1
            numbers[str(entry["step"])] = number
            status = f" HTTP {entry['status']}" if entry.get("status") is not None else ""
            size = (entry["response"] or {}).get("size")
            chunks = entry.get("chunks")
            streamed = f", streamed in {chunks} chunks" if chunks is not None else ""
            out_console.print(
                f"[bold]model turn {number}[/] {escape(str(entry['source']))} "
                f"{escape(str(entry['model']))}{status} [dim]({size} response bytes"
                f"{streamed})[/]"
            )
            out_console.print(textwrap.indent(f"→ {escape(entry['summary'])}", "   "))
            continue
        arguments = json.dumps(entry["arguments"], ensure_ascii=False, sort_keys=True)
        head = f"{entry['call']} {entry['tool']}({_short(arguments)})"
        if entry.get("model_call_id") is not None:
            head = (
                f"{entry['call']} [{entry['model_call_id']}] {entry['tool']}({_short(arguments)})"
            )
        asker = numbers.get(str(entry.get("model_turn")))
        if asker is not None and asker != number:  # not the turn printed just above it
            head += f" (asked by model turn {asker})"
        if entry["ok"]:
            value = entry["value"]
            shown = (
                value
                if isinstance(value, str)
                else json.dumps(value, ensure_ascii=False, sort_keys=True)
            )
            tail = f"[green]ok[/] {escape(_short(shown))}"
        elif entry["ok"] is None:
            tail = "[yellow]no result recorded[/]"
        else:
            failure = entry["failure"] or {}
            tail = f"[red]failed[/] {escape(str(failure.get('kind')))}"
        out_console.print(f"     [bold]{escape(head)}[/] {tail}")
