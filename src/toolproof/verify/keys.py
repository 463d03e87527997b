"""The recorded idempotency keys of a run, checked against their formula (``call-linkage``).

A recording session writes each call's key in its ``tool_called`` event
(:mod:`toolproof.tools.idempotency`). :class:`KeyLedger` judges each keyed call in
admission order as the trace is read: a call whose step (``call-00000007``) is the next
admitted is judged at once, one that comes before a call admitted earlier (calls run
concurrently finish out of order) waits, with what the formula needs, until the gap is
filled, and what still waits at the end is judged then in step order. It keeps, per
keyed call, the key's first event by :func:`~toolproof.verify.compact.compact_key`
(about 110 bytes) and the occurrence count of each distinct call (about 90 bytes), and
finds:

* two calls recording the same key (one key names one call);
* when the key is recomputable: a key that is not the formula's for the runtime's
  ``session``, the tool's fingerprint in the runtime's Toolset, the arguments' digest
  and the call's occurrence, counted in admission order (the order of the session's
  step numbers, ``call-00000001`` and up).

A key is recomputable when the runtime names its session and the run holds the
session from its first call: a later segment of a sealed session (``segment.json``
with ``index`` above 1) counts occurrences its predecessors began, so only the first
rule applies to it. A run recorded before keys existed has none, and nothing is found.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import ExecutionRuntime, Finding, Severity
from toolproof.contract.trace import ToolCalled
from toolproof.identity import digest_json
from toolproof.tools.idempotency import Occurrences, idempotency_key
from toolproof.verify.base import Findings, finding
from toolproof.verify.compact import compact_key

__all__ = ["SEGMENT_FILE", "KeyLedger", "later_segment"]

SEGMENT_FILE = "segment.json"
"""The file a segment of a sealed session carries, in its live directory and its run:
``{"session", "index", "previous": {"run_id", "files_digest"} | null}``
(:mod:`toolproof.runs.segments`)."""


def _admitted(number: int) -> str:
    """The step of the session's ``number``-th admitted call (``call-00000007``)."""
    return f"call-{number:08d}"


def later_segment(directory: Path) -> bool:
    """Whether ``directory`` is segment 2 or later of a sealed session."""
    try:
        value = json.loads((directory / SEGMENT_FILE).read_bytes())
    except (OSError, ValueError):
        return False
    index = value.get("index") if isinstance(value, dict) else None
    return isinstance(index, int) and index > 1


class KeyLedger:
    """What the ``call-linkage`` check keeps of the calls' idempotency keys.

    Args:
        runtime: the run's runtime (``None`` when it did not parse: nothing is recomputed).
        directory: the run directory (for ``segment.json``).

    """

    def __init__(self, runtime: ExecutionRuntime | None, directory: Path) -> None:
        self.session = runtime.session if runtime is not None else None
        self.fingerprints = (
            {tool.name: tool.fingerprint for tool in runtime.toolset.tools}
            if runtime is not None
            else {}
        )
        self.recomputable = self.session is not None and not later_segment(directory)
        self._waiting: dict[str, list[tuple[int, str, str, str]]] = {}  # by step
        self._next = 1  # the admission number judged next
        self._occurrences = Occurrences()
        self._seen: dict[int, int] = {}  # compact_key(key): its first event
        self.duplicates = Findings()
        self.wrong = Findings()

    def note(self, event: ToolCalled) -> None:
        """Keep what the checks need of one ``tool_called`` event (nothing without a key)."""
        key = event.idempotency_key
        if key is None:
            return
        first = self._seen.setdefault(compact_key(key), event.idx)
        if first != event.idx:
            message = (
                f"event {event.idx}: idempotency key {key} was already recorded for the call at "
                f"event {first} (rule: one key names one call)"
            )
            self.duplicates.add(finding(Severity.CRITICAL, TRACE_FILE, message, event=event.idx))
        if self.recomputable:
            digest = digest_json(event.call.arguments)
            self._waiting.setdefault(event.step, []).append(
                (event.idx, event.call.tool, digest, key)
            )
            self._release()

    def _release(self) -> None:
        """Judge the waiting calls whose steps are next in admission order."""
        while (step := _admitted(self._next)) in self._waiting:
            for call in sorted(self._waiting.pop(step)):
                self._judge(*call)
            self._next += 1

    def _judge(self, idx: int, tool: str, digest: str, key: str) -> None:
        fingerprint = self.fingerprints.get(tool, "")
        occurrence = self._occurrences.next(tool, fingerprint, digest)
        assert self.session is not None
        expected = idempotency_key(self.session, tool, fingerprint, digest, occurrence)
        if key != expected:
            message = (
                f"event {idx}: idempotency key {key} of the call to {tool!r} is not the "
                f"formula's {expected} (session {self.session!r}, occurrence {occurrence} "
                "of these arguments; rule: docs/durability.md)"
            )
            self.wrong.add(finding(Severity.CRITICAL, TRACE_FILE, message, event=idx))

    def findings(self) -> list[Finding]:
        """The duplicates, then every key that is not its formula's, in admission order."""
        for step in sorted(self._waiting):  # after a gap in the admission numbers
            for call in sorted(self._waiting.pop(step)):
                self._judge(*call)
        return [*self.duplicates, *self.wrong]
