"""A live session's trace, read once in order: what its run is made of, and what is dropped.

:func:`scan_live` reads a live session's ``trace.jsonl`` a line at a time
(:class:`~toolproof.bundle.trace.TraceReader`), parses each line and keeps only what
the committed run needs: the spec steps of its calls, model turns, reads and prompt
gets, the calls' tool names and idempotency keys, and an index of the events a frozen
re-execution serves (:class:`~toolproof.runs.traceindex.TraceIndex`: 8 bytes an
indexed event). Parsed events are dropped as they go.

What a run can be made of (:func:`~toolproof.runs.finalize.recover_session` keeps it,
:func:`~toolproof.runs.finalize.finalize_session` refuses a trace that needs any of
it dropped): the events up to the last complete call block (a ``step_finished``) of
the sound prefix (each line a canonical event at its position, chained to the one
before), and before the first block registering evidence whose bytes the session
lacks (only a torn pack loses an item: a killed process writes an item before its
event). Every stored item no kept event registers is reported too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from toolproof.bundle.pack import PACK_FILE, PackContents, read_pack
from toolproof.bundle.trace import MAX_LINE_BYTES, TraceLine, TraceReader, parse_event
from toolproof.contract.layout import EVIDENCE_DIR, TRACE_FILE, evidence_path
from toolproof.contract.runs import StepSpec
from toolproof.contract.trace import (
    EvidenceRegistered,
    ModelTurn,
    PromptGot,
    ResourceRead,
    StepFinished,
    ToolCalled,
    TraceEvent,
)
from toolproof.identity import digest
from toolproof.runs.traceindex import TraceIndex

__all__ = ["LiveEvidence", "LiveTrace", "live_evidence", "scan_live"]


@dataclass(frozen=True)
class LiveEvidence:
    """The evidence a live session holds: its pack's sound items and its ``evidence/`` files.

    Attributes:
        pack: ``evidence.pack`` as read, or ``None`` when there is none.
        files: names in ``evidence/`` (a session recorded before the pack).

    """

    pack: PackContents | None
    files: frozenset[str]

    def __contains__(self, name: object) -> bool:
        """Whether an item of hex name ``name`` is stored."""
        return name in self.files or (self.pack is not None and name in self.pack.items)

    def names(self) -> list[str]:
        """The hex names of every stored item, sorted."""
        return sorted(set(self.files) | (set(self.pack.items) if self.pack is not None else set()))

    def problem(self) -> str | None:
        """What ended the pack's sound part early, as a dropped message, or ``None``."""
        pack = self.pack
        if pack is None or pack.problem is None:
            return None
        rest = pack.size - pack.end
        return f"{PACK_FILE} {pack.problem}; dropped with the {rest} bytes from there on"


def live_evidence(live: Path) -> LiveEvidence:
    """Read the live session's pack (checking every digest) and list its evidence files.

    Raises:
        OSError: the pack or the folder cannot be read.

    """
    folder = live / EVIDENCE_DIR
    files = frozenset(p.name for p in folder.iterdir()) if folder.is_dir() else frozenset()
    pack_path = live / PACK_FILE
    pack = read_pack(pack_path) if pack_path.exists() else None
    return LiveEvidence(pack, files)


def _step(event: TraceEvent) -> StepSpec | None:
    """The spec step a session's event stands for (a call, model turn, read, prompt get)."""
    if isinstance(event, ModelTurn):
        params: dict[str, JsonValue] = {"source": event.source, "model": event.model}
        return StepSpec(id=event.step, kind="model", params=params)
    if isinstance(event, ToolCalled):
        return StepSpec(id=event.step, tool=event.call.tool, arguments=event.call.arguments)
    if isinstance(event, ResourceRead):
        return StepSpec(id=event.step, kind="read", params={"uri": event.uri})
    if isinstance(event, PromptGot):
        asked: dict[str, JsonValue] = {"name": event.name, "arguments": dict(event.arguments)}
        return StepSpec(id=event.step, kind="prompt", params=asked)
    return None


@dataclass
class LiveTrace:
    """What a live trace's run is made of (:func:`scan_live`).

    Attributes:
        recording: the index of the kept events (a frozen re-execution serves them).
        steps: the spec steps of the kept calls, model turns, reads and prompt gets.
        tools: each kept call's tool name, in order.
        keys: the kept calls' idempotency keys.
        reads: kept resource reads.
        turns: the first kept model turn of each (source, model).
        events: events kept.
        dropped: a message per thing dropped (see the module docstring).
        problem: the file as a whole (it does not end with a newline), or ``None``.

    """

    recording: TraceIndex
    steps: list[StepSpec] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    reads: int = 0
    turns: dict[tuple[str, str], ModelTurn] = field(default_factory=dict)
    events: int = 0
    dropped: list[str] = field(default_factory=list)
    problem: str | None = None


class _Block:
    """The events of the open call block, summed up until its ``step_finished`` keeps them."""

    def __init__(self) -> None:
        self.steps: list[StepSpec] = []
        self.tools: list[str] = []
        self.keys: list[str] = []
        self.reads = 0
        self.turns: list[ModelTurn] = []
        self.registered: list[str] = []
        self.events: list[tuple[int, str, str]] = []  # (idx, type, step) for a dropped message

    def add(self, event: TraceEvent) -> None:
        self.events.append((event.idx, event.type, event.step))
        step = _step(event)
        if step is not None:
            self.steps.append(step)
        if isinstance(event, ToolCalled):
            self.tools.append(event.call.tool)
            if event.idempotency_key:
                self.keys.append(event.idempotency_key)
        elif isinstance(event, ResourceRead):
            self.reads += 1
        elif isinstance(event, ModelTurn):
            self.turns.append(event)
        elif isinstance(event, EvidenceRegistered):
            self.registered.append(event.evidence.path)


class _Scan:
    """The state of :func:`scan_live` (one pass)."""

    def __init__(self, out: LiveTrace, evidence: LiveEvidence) -> None:
        self.out, self.evidence = out, evidence
        self.block = _Block()
        self.names: dict[str, str] = {}  # each tool name once (the calls share it)
        self.referenced: set[int] = set()  # the hashes of the kept events' item names
        self.previous: str | None = None
        self.broken: tuple[int, str] | None = None  # (position, why) of the first bad line
        self.missing: tuple[int, EvidenceRegistered] | None = None  # first item not stored
        self.end = 0  # events up to the last step_finished of the sound prefix
        self.cut = 0  # byte offset where the kept events end

    def line(self, line: TraceLine, length: int) -> None:
        event = line.event
        assert event is not None
        self.out.recording.add(line)
        self.block.add(event)
        if isinstance(event, EvidenceRegistered) and self.missing is None:
            name = event.evidence.path.removeprefix(EVIDENCE_DIR + "/")
            if name not in self.evidence:
                self.missing = (line.position, event)
        if isinstance(event, StepFinished):
            self.end = line.position + 1
            if self.missing is None:  # a block after an item the session lacks is not kept
                self._keep(line.offset + length + 1)
            self.block = _Block()

    def _keep(self, cut: int) -> None:
        out, block = self.out, self.block
        out.steps += block.steps
        out.tools += [self.names.setdefault(tool, tool) for tool in block.tools]
        out.keys.update(block.keys)
        out.reads += block.reads
        for turn in block.turns:
            out.turns.setdefault((turn.source, turn.model), turn)
        for path in block.registered:
            self.referenced.add(hash(path.removeprefix(EVIDENCE_DIR + "/")))
        out.events = len(block.events) + out.events
        self.cut = cut


def scan_live(live: Path, evidence: LiveEvidence) -> LiveTrace:
    """Read ``live``'s trace once and sum up what its run is made of (module docstring).

    Raises:
        OSError: the trace cannot be read.

    """
    path = live / TRACE_FILE
    out = LiveTrace(TraceIndex(path))
    scan = _Scan(out, evidence)
    lines = 0
    if path.is_file():
        reader = TraceReader(path)
        for raw in reader.lines():
            lines += 1
            if scan.broken is not None:
                continue
            if raw.data is None:
                scan.broken = (raw.position, f"is longer than {MAX_LINE_BYTES} bytes")
                continue
            event, problem = parse_event(raw.data)
            line_digest = digest(raw.data)
            if event is None or event.idx != raw.position or event.prev != scan.previous:
                scan.broken = (raw.position, problem or "breaks the hash chain or the event order")
                continue
            scan.line(TraceLine(raw.position, line_digest, event, None, raw.offset), raw.length)
            scan.previous = line_digest
        if not reader.ends_with_newline:
            out.problem = "does not end with a newline (truncated?)"
    out.recording.cut(scan.cut)
    _report(scan, lines)
    return out


def _report(scan: _Scan, lines: int) -> None:
    """Fill ``dropped``: a bad line, an incomplete last block, lost bytes, unreferenced items."""
    out, dropped = scan.out, scan.out.dropped
    if scan.broken is not None:
        position, why = scan.broken
        rest = lines - position
        dropped.append(
            f"trace line {position + 1}: {why}; dropped with the {rest - 1} lines after it"
        )
    for idx, kind, step in scan.block.events:
        dropped.append(
            f"event {idx} ({kind} of step {step!r}): its call block is "
            "incomplete (the server stopped before the call was answered)"
        )
    if scan.missing is not None and scan.missing[0] < scan.end:
        event = scan.missing[1]
        dropped.append(
            f"events {out.events} to {scan.end - 1} (step {event.step!r} and every "
            f"step after it): event {event.idx} registers {event.evidence.path}, whose bytes "
            "are not in the live session"
        )
    pack_problem = scan.evidence.problem()
    if pack_problem is not None:
        dropped.append(pack_problem)
    dropped += [
        f"{evidence_path(name)}: stored for a call whose block is incomplete"
        for name in scan.evidence.names()
        if hash(name) not in scan.referenced
    ]
