"""The ``acted-once`` check: a call that must not act twice ran at most once per key.

A recording session records, in ``runtime.json``, what each tool declares about
running a call again (``repeatable``: ``read_only``, ``idempotent`` or ``key``;
docs/durability.md). A tool that declares none of the three acts every time its body
runs, so from the run directory alone the check proves, for every idempotency key of
such a tool's calls:

* **at most one execution**: one ``tool_called`` whose body ran (its result is a value
  or a failure other than those that say the body did not run, :data:`NOT_RUN`), and no
  further attempt inside it: a ``failure_observed`` that a layer recovered from
  (``retry`` ran the call again) or a result whose ``detail.attempts`` is above 1 is a
  second execution under the same key;
* **every ``outcome_unknown`` is reconciled or reported**: a call a resumed session
  could not re-run (it was cut before its result and may have acted) is reconciled
  when its failure carries a person's finding (``detail.reconciled``,
  ``toolproof sessions reconcile``); otherwise it is a warning naming the call and its
  key (for every tool).

A tool that honours the key (``key``) may run a call's body again under its key (the
service acts once per key): its attempts are one action by its declaration. Read-only
and idempotent tools are not held to anything. A run without ``repeatable`` (a plan
run, or a session recorded before it existed) is not checked.

Memory: per execution of a tool declaring none of the three, its key, call id, tool
and event index (about 0.4 kB: :meth:`ActedOnceState.executed_keys`, which
``verify --chain`` compares across segments), kept to the end of the pass; per call,
until the next step starts after its result (its ``failure_observed`` events come after
the result, in its step).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolproof.bundle.trace import TraceLine, TraceReader
from toolproof.contract.layout import TRACE_FILE
from toolproof.contract.runs import Finding, Severity
from toolproof.contract.tools import ToolFailure
from toolproof.contract.trace import FailureObserved, StepStarted, ToolCalled, ToolReturned
from toolproof.failures import FailureKind
from toolproof.verify.base import Check, Findings, finding, stream_check
from toolproof.verify.view import RunView

__all__ = [
    "ACTED_ONCE_CHECK",
    "NOT_RUN",
    "ActedOnceState",
    "ChainKeys",
    "across_segments",
    "acted_once_state",
]

NOT_RUN = frozenset(
    {
        FailureKind.INVALID_ARGUMENTS,
        FailureKind.CANCELLED,
        FailureKind.DESCRIPTOR_MISMATCH,
        FailureKind.APPROVAL_PENDING,
        FailureKind.APPROVAL_DENIED,
        FailureKind.DENIED_BY_POLICY,
        FailureKind.UNKNOWN_TOOL,
        FailureKind.UNRECORDED,
        FailureKind.CASSETTE_MISS,
        FailureKind.OUTCOME_UNKNOWN,
    }
)
"""Failure kinds that say the call's body did not run (docs/failures.md)."""


def _unreconciled(failure: ToolFailure | None) -> bool:
    """An ``outcome_unknown`` failure that carries no person's reconciliation."""
    if failure is None or failure.kind != FailureKind.OUTCOME_UNKNOWN:
        return False
    return not isinstance(failure.detail.get("reconciled"), dict)


class ActedOnceState:
    """The ``acted-once`` check's state over one pass of the trace.

    Args:
        declared: ``runtime.json``'s ``repeatable`` (tool name to ``read_only``,
            ``idempotent`` or ``key``); a tool not in it must act at most once per key.

    """

    def __init__(self, declared: dict[str, str]) -> None:
        self.declared = declared
        self.out = Findings()
        self.calls: dict[str, tuple[str, str, int]] = {}  # call id: (tool, key, called at)
        self.executed: dict[str, tuple[str, int, str]] = {}  # key: (call id, called at, tool)
        self.again: set[str] = set()  # calls found running more than once
        # calls of the open step that returned: their failure_observed events come after
        # the result, in the same step; dropped from calls when the next step starts
        self.returned: list[str] = []

    def _add(self, severity: Severity, message: str, **detail: Any) -> None:
        self.out.add(finding(severity, TRACE_FILE, message, **detail))

    def feed(self, line: TraceLine) -> None:
        """Take the next event (see the module docstring)."""
        event = line.event
        if isinstance(event, StepStarted):
            for call_id in self.returned:
                self.calls.pop(call_id, None)
            self.returned.clear()
        elif isinstance(event, ToolCalled):
            key = event.idempotency_key
            if key is not None:
                tool = sys.intern(event.call.tool)  # one string per tool, not per call
                self.calls[event.call_id] = (tool, key, event.idx)
        elif isinstance(event, ToolReturned):
            self._returned(event)
        elif isinstance(event, FailureObserved) and event.recovered_by:
            self._recovered(event)

    def _recovered(self, event: FailureObserved) -> None:
        """A layer recovered from a failed attempt by running the call again."""
        if event.failure.kind not in NOT_RUN:
            how = (
                f"after its attempt failed {event.failure.kind} ({event.recovered_by!r} "
                f"ran it again; failure_observed at event {event.idx})"
            )
            self._again(event.call_id, how)

    def _returned(self, event: ToolReturned) -> None:
        called = self.calls.get(event.call_id)
        if called is None:
            return
        self._judge(event, *called)
        self.returned.append(event.call_id)

    def _judge(self, event: ToolReturned, tool: str, key: str, at: int) -> None:
        failure = event.result.failure
        if _unreconciled(failure):
            self._add(
                Severity.WARNING,
                f"event {event.idx}: the outcome of call {event.call_id} to {tool!r} (key "
                f"{key}) is unknown: it was cut before its result and not re-run; find out "
                "whether it acted and record it (toolproof sessions reconcile)",
                event=event.idx,
                call=event.call_id,
                key=key,
            )
        if tool in self.declared:
            return  # harmless, or may run again under its key
        if failure is not None and failure.kind in NOT_RUN:
            return
        first = self.executed.setdefault(key, (event.call_id, at, tool))
        if first[:2] != (event.call_id, at):
            self._twice(key, tool, first[:2], f"by call {event.call_id} at event {at}")
        attempts = failure.detail.get("attempts") if failure is not None else None
        if type(attempts) is int and attempts > 1:
            how = f"in {attempts} attempts (tool_returned at event {event.idx})"
            self._again(event.call_id, how)

    def _again(self, call_id: str, how: str) -> None:
        """Another attempt of a call whose tool must act at most once: a second execution."""
        called = self.calls.get(call_id)
        if called is None or called[0] in self.declared or call_id in self.again:
            return
        self.again.add(call_id)
        tool, key, at = called
        self._twice(key, tool, (call_id, at), f"again by the same call, {how}")

    def _twice(self, key: str, tool: str, first: tuple[str, int], second: str) -> None:
        self._add(
            Severity.CRITICAL,
            f"idempotency key {key} of tool {tool!r} (neither read-only nor idempotent, nor "
            f"honouring the key) was executed twice: by call {first[0]} at event {first[1]} "
            f"and {second} (rule: at most one execution per key; docs/durability.md)",
            key=key,
            call=first[0],
            event=first[1],
        )

    def finish(self) -> list[Finding]:
        """The findings, in the order found."""
        return list(self.out)

    def executed_keys(self) -> dict[str, tuple[str, str, int]]:
        """``{key: (tool, call id, event index of its tool_called)}`` of every execution."""
        return {key: (tool, call, at) for key, (call, at, tool) in self.executed.items()}


def acted_once_state(view: RunView) -> ActedOnceState | None:
    """The check's state, or ``None`` when ``runtime.json`` records no ``repeatable``."""
    runtime = view.runtime
    if runtime is None or runtime.repeatable is None:
        return None
    return ActedOnceState(dict(runtime.repeatable))


ACTED_ONCE_CHECK = Check(
    "acted-once",
    "INV-ACTED-ONCE",
    Severity.CRITICAL,
    "each call of a tool neither read-only, idempotent nor keyed ran at most once per "
    "idempotency key (attempts included); every outcome_unknown is reported",
    lambda view: stream_check(view, acted_once_state),
    stream=acted_once_state,
)
"""The ``acted-once`` check, run by ``verify_run`` for session runs (docs/durability.md)."""


def across_segments(segments: Sequence[tuple[str, dict[str, tuple[str, str, int]]]]) -> str:
    """The first key a sealed session's segments executed twice, as a problem, or ``""``.

    Args:
        segments: each segment's run id and executed keys
            (:attr:`~toolproof.verify.verifier.Verification.executed`), segment 1 first.

    Memory: the keys of the calls of tools that must act once, over the chain (about
    0.2 kB each).
    """
    seen: dict[str, tuple[int, str, str, int]] = {}
    for index, (run_id, executed) in enumerate(segments, 1):
        for key, (tool, call, at) in executed.items():
            first = seen.setdefault(key, (index, run_id, call, at))
            if first[0] != index:
                return (
                    f"acted-once: idempotency key {key} of tool {tool!r} was executed in "
                    f"segment {first[0]} (run {first[1]}, call {first[2]} at event {first[3]}) "
                    f"and again in segment {index} (run {run_id}, call {call} at event "
                    f"{at}) (rule: at most one execution per key across a session's segments; "
                    "docs/durability.md)"
                )
    return ""


class ChainKeys:
    """:func:`across_segments` fed one segment at a time, from the head back to segment 1.

    Gives the problem :func:`across_segments` gives for the same segments, keeping per
    executed key only its first 16 bytes and where it ran last seen (one int): about
    120 bytes a key (a million-call chain: about 120 MB, where every segment's
    executed keys with their call ids took about 350). A key seen in two segments keeps
    both places; the tool and call ids the problem names are read back from those
    segments' traces.
    """

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}  # key's 16 bytes: steps back << 32 | event index
        self._twice: dict[bytes, tuple[str, int, int]] = {}  # key, earliest, next
        self._segments: list[tuple[str, Path]] = []  # run id, directory; head first

    def add(self, run_id: str, directory: Path, executed: dict[str, tuple[str, str, int]]) -> None:
        """Take the segment before the last one added (the head first).

        Args:
            run_id: the segment's run id.
            directory: its run directory (read again only to name a key run twice).
            executed: its :attr:`~toolproof.verify.verifier.Verification.executed`.

        """
        back = len(self._segments)
        self._segments.append((run_id, directory))
        for key, (_, _, at) in executed.items():
            short = bytes.fromhex(key.removeprefix("idem_")[:32])
            here = back << 32 | at
            later = self._seen.get(short)
            self._seen[short] = here
            if later is not None:  # this segment is earlier: the pair is (here, later)
                self._twice[short] = (key, here, later)

    def _called(self, back: int, at: int) -> tuple[str, str]:
        """The tool and call id of the ``tool_called`` at event ``at`` of a segment."""
        for line in TraceReader(self._segments[back][1] / TRACE_FILE).lines():
            if line.position == at:
                event = json.loads(line.data or b"{}")
                return str(event.get("call", {}).get("tool")), str(event.get("call_id"))
        return "?", "?"

    def problem(self) -> str:
        """The first key executed in two segments (in the order segment 1 first), or ``""``."""
        if not self._twice:
            return ""
        count = len(self._segments)

        def order(pair: tuple[str, int, int]) -> tuple[int, int]:
            later = pair[2]
            return count - (later >> 32), later & 0xFFFFFFFF

        key, first, second = min(self._twice.values(), key=order)
        places = []
        for packed in (first, second):
            back, at = packed >> 32, packed & 0xFFFFFFFF
            tool, call = self._called(back, at)
            places.append((count - back, self._segments[back][0], tool, call, at))
        (index_1, run_1, tool, call_1, at_1), (index_2, run_2, _, call_2, at_2) = places
        return (
            f"acted-once: idempotency key {key} of tool {tool!r} was executed in "
            f"segment {index_1} (run {run_1}, call {call_1} at event {at_1}) "
            f"and again in segment {index_2} (run {run_2}, call {call_2} at event "
            f"{at_2}) (rule: at most one execution per key across a session's segments; "
            "docs/durability.md)"
        )
