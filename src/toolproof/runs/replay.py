"""Frozen replay: re-execute a recorded run from its own results, and compare.

Order: (1) verify the manifest; (2) read the run's files (the trace once, in bounded
memory: its events indexed by key and read back when a step is served,
:mod:`toolproof.runs.traceindex`); (3) compare the current
Toolset descriptor (when given) and the reasoner with the recorded runtime; (4)
re-plan the recorded spec and compare the plan id; (5) re-execute with
:class:`~toolproof.runs.calls.FrozenCalls` (recorded results by call id, never a live
tool) into a scratch directory, re-run the checks, and compare the trace byte for
byte and the report. It refuses (:class:`ReplayRefused`, nothing called) on a
tampered or missing file, a changed descriptor or plan, or an unrecorded call; with
``lenient`` only tampering refuses, the rest is reported in ``differences``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolproof.bundle.manifest import check_manifest
from toolproof.bundle.rundir import RUNS_DIR
from toolproof.contract.layout import REPORT_FILE, TRACE_FILE
from toolproof.contract.runs import ExecutionRuntime, Report, RunSpec
from toolproof.contract.tools import ToolDescriptor, ToolsetDescriptor
from toolproof.errors import InputError, ReplayRefused
from toolproof.identity import canonical_json
from toolproof.runs.calls import FrozenCalls, FrozenClock
from toolproof.runs.diff import first_trace_file_difference
from toolproof.runs.executor import StepHandler
from toolproof.runs.planner import plan_run
from toolproof.runs.registries import RunRegistries
from toolproof.runs.retrieve import default_handlers
from toolproof.runs.run import record_run, step_kinds
from toolproof.runs.traceindex import TraceIndex
from toolproof.runs.turns import RecordedTurns
from toolproof.verify.keys import SEGMENT_FILE
from toolproof.verify.sequence import check_sequence
from toolproof.verify.view import RunView

__all__ = ["ReplayResult", "describe_descriptor_change", "describe_tool_change", "replay_run"]


@dataclass(frozen=True)
class ReplayResult:
    """The outcome of a frozen replay.

    Attributes:
        run_id: the replayed run.
        identical: the trace and report came out byte-identical.
        events: events in the replayed trace.
        first_difference: the first differing event and why (``None`` when identical).
        report_matches: the recomputed report equals ``report.json``.
        report: the replay's report.
        differences: what lenient mode let through (descriptor, plan, unrecorded calls).
        live_calls: tool calls made: always 0.

    """

    run_id: str
    identical: bool
    events: int
    first_difference: dict[str, Any] | None
    report_matches: bool
    report: Report
    differences: list[str] = field(default_factory=list)
    live_calls: int = 0

    def to_json(self) -> dict[str, Any]:
        """The result as JSON."""
        return {
            "run_id": self.run_id,
            "identical": self.identical,
            "events": self.events,
            "first_difference": self.first_difference,
            "report_matches": self.report_matches,
            "report_outcome": self.report.outcome,
            "differences": self.differences,
            "live_calls": self.live_calls,
        }


_FIELDS = ("version", "source", "base", "stack", "deterministic", "varies")
"""Tool descriptor fields compared one by one (the fingerprint covers them and the spec)."""


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def describe_tool_change(old: ToolDescriptor, new: ToolDescriptor) -> str:
    """What changed in one tool's descriptor, field by field, with old and new values.

    Returns:
        ``"source 'a' -> 'b'; fingerprint sha256:... -> sha256:..."``; when only the
        fingerprint moved, it says that the spec (name, description, schemas,
        annotations) changed, since every other input of the fingerprint is unchanged.

    """
    parts = [
        f"{name} {_short(before)!r} -> {_short(after)!r}"
        for name in _FIELDS
        if (before := getattr(old, name)) != (after := getattr(new, name))
    ]
    if old.fingerprint != new.fingerprint:
        why = "" if parts else " (its spec changed: description, schemas or annotations)"
        parts.append(f"fingerprint {old.fingerprint} -> {new.fingerprint}{why}")
    return "; ".join(parts)


def _exposure(descriptor: ToolsetDescriptor) -> str:
    exposure = descriptor.exposure
    if exposure is None:
        return "nothing hidden"
    return f"hidden: {', '.join(exposure.hidden) or 'none'}"


def describe_descriptor_change(old: ToolsetDescriptor, new: ToolsetDescriptor) -> str:
    """Which tools were added, removed or changed between two descriptors (locks, exposure).

    Returns:
        ``"removed a; added b; changed c (fingerprint sha256:.. -> sha256:..)"``.

    """
    before = {tool.name: tool for tool in old.tools}
    after = {tool.name: tool for tool in new.tools}
    parts = []
    if old.lock != new.lock:
        parts.append(f"the tool lock changed ({old.lock or 'no lock'} -> {new.lock or 'no lock'})")
    if old.exposure != new.exposure:
        parts.append(f"the exposure changed ({_exposure(old)} -> {_exposure(new)})")
    removed = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    if removed:
        parts.append(f"removed {', '.join(removed)}")
    if added:
        parts.append(f"added {', '.join(added)}")
    for name in sorted(set(before) & set(after)):
        if before[name] != after[name]:
            parts.append(f"changed {name} ({describe_tool_change(before[name], after[name])})")
    return "; ".join(parts) or "descriptor metadata changed"


def _refuse(message: str, **fields: Any) -> ReplayRefused:
    return ReplayRefused(f"frozen replay refused: {message}", **fields)


def _scratch_root(directory: Path) -> Path | None:
    return directory.parent.parent if directory.parent.name == RUNS_DIR else None


def _with_turns(
    handlers: Mapping[str, StepHandler], spec: RunSpec, recording: TraceIndex, directory: Path
) -> Mapping[str, StepHandler]:
    """``handlers`` plus the recorded model turns of an agent session's ``model`` steps."""
    if "model" in handlers or not any(step.kind == "model" for step in spec.steps):
        return handlers
    return {**handlers, "model": RecordedTurns(recording, directory)}


def _carry_segment(directory: Path, scratch: Path) -> None:
    """Copy a segment's ``segment.json`` into the re-execution's directory.

    A later segment's checks read it (``policy`` continues its predecessor's counts),
    so its report is recomputed the way it was recorded.
    """
    if (directory / SEGMENT_FILE).is_file():
        shutil.copyfile(directory / SEGMENT_FILE, scratch / SEGMENT_FILE)


async def replay_run(
    directory: Path,
    *,
    toolset: ToolsetDescriptor | None = None,
    lenient: bool = False,
    handlers: Mapping[str, StepHandler] | None = None,
    registries: RunRegistries | None = None,
) -> ReplayResult:
    """Replay a run directory frozen; see the module docstring.

    Args:
        directory: the run directory.
        toolset: the descriptor of the current composition root's Toolset (``None``:
            compare nothing, use the recorded one).
        lenient: report descriptor, plan and call differences instead of refusing.
        handlers: step handlers by kind (default: :func:`default_handlers`; their tool
            calls are served from the record like every call).
        registries: where the recorded reasoner and checks resolve (default:
            ``RunRegistries()``, the built-ins and the installed entry points).

    Raises:
        ReplayRefused: see the module docstring; the message names the file or the change.

    """
    directory = Path(directory)
    registries = registries if registries is not None else RunRegistries()
    manifest, digests, findings = check_manifest(directory)
    if findings:
        first = findings[0]
        raise _refuse(
            f"[manifest] {first.file}: {first.message}", file=first.file, check="manifest"
        )
    assert manifest is not None
    view = RunView(directory, digests, {entry.path: entry.size for entry in manifest.files})
    recording = TraceIndex(directory / TRACE_FILE, max_line_bytes=view.max_line_bytes)
    view.scan([recording.add])  # one pass: the events are indexed by key, not held
    if view.problems:
        rel, problem = next(iter(view.problems.items()))
        raise _refuse(f"[schema] {rel}: {problem}", file=rel, check="schema")
    assert view.spec is not None and view.plan is not None and view.runtime is not None
    spec, plan_id, runtime = view.spec, view.plan.id, view.runtime
    del view  # its plan is not needed past its id
    with recording:
        return await _replay(
            directory,
            manifest.run_id,
            spec,
            plan_id,
            runtime,
            recording,
            toolset=toolset,
            lenient=lenient,
            handlers=handlers,
            registries=registries,
        )


async def _replay(
    directory: Path,
    run_id: str,
    spec: RunSpec,
    plan_id: str,
    runtime: ExecutionRuntime,
    recording: TraceIndex,
    *,
    toolset: ToolsetDescriptor | None,
    lenient: bool,
    handlers: Mapping[str, StepHandler] | None,
    registries: RunRegistries,
) -> ReplayResult:
    """Steps (3) to (5) of :func:`replay_run`, its run's files read."""
    if handlers is None:  # recorded reads and prompts are served from the trace
        handlers = default_handlers(recording=recording)
    handlers = _with_turns(handlers, spec, recording, directory)
    differences: list[str] = []

    def differ(message: str, **fields: Any) -> None:
        if not lenient:
            raise _refuse(message, **fields)
        differences.append(message)

    current = toolset if toolset is not None else runtime.toolset
    if current.id != runtime.toolset.id:
        change = describe_descriptor_change(runtime.toolset, current)
        differ(
            f"the runtime descriptor changed: {change}",
            rule="runtime descriptor",
            changed=sorted(
                tool.name for tool in current.tools if tool not in runtime.toolset.tools
            ),
        )
    try:
        reasoner = registries.reasoners.create(spec.reasoner)
    except InputError as exc:
        raise _refuse(f"the recorded reasoner cannot be built: {exc.message}") from None
    if reasoner.descriptor() != runtime.reasoner:
        then = f"{runtime.reasoner.name}/{runtime.reasoner.version}"
        if then == reasoner.label:
            why = reasoner.describe_change(recording.events()) or (
                f"its configuration digest was {runtime.reasoner.config_digest}, "
                f"now {reasoner.descriptor().config_digest}"
            )
            differ(f"the reasoner {then} changed: {why}", rule="reasoner")
        else:
            differ(f"the reasoner changed: recorded {then}, now {reasoner.label}", rule="reasoner")
    try:
        checks, check_descriptors = check_sequence(spec.checks, registries.checks)
    except InputError as exc:
        raise _refuse(f"the recorded checks cannot be built: {exc.message}") from None
    if check_descriptors != runtime.checks:
        now = ", ".join(f"{d.name}/{d.version}" for d in check_descriptors) or "none"
        then = ", ".join(f"{d.name}/{d.version}" for d in runtime.checks) or "none"
        differ(f"the checks changed: recorded {then}, now {now}", rule="checks")
    try:
        replanned = plan_run(spec, current, step_kinds=step_kinds(handlers))
    except InputError as exc:
        raise _refuse(f"the spec no longer plans: {exc.message}", rule="plan") from None
    if replanned.id != plan_id:
        differ(f"the plan changed: recorded {plan_id}, re-planned {replanned.id}", rule="plan")
    frozen = ExecutionRuntime.model_validate({**runtime.to_json(), "mode": "frozen", "id": ""})
    calls = FrozenCalls(recording, lenient=lenient)
    with tempfile.TemporaryDirectory(prefix=".tmp-replay-", dir=_scratch_root(directory)) as tmp:
        scratch = Path(tmp)
        _carry_segment(directory, scratch)
        recorded = await record_run(
            scratch,
            spec=spec,
            plan=replanned,
            runtime=frozen,
            calls=calls,
            clock=FrozenClock(recording),
            reasoner=reasoner,
            handlers=handlers,
            durable=False,
            checks=checks,
        )
        if calls.refused is not None:  # raised inside a handler or reasoner that caught it
            raise calls.refused
        difference = first_trace_file_difference(directory / TRACE_FILE, scratch / TRACE_FILE)
    report_matches = (directory / REPORT_FILE).read_bytes() == canonical_json(
        recorded.report.to_json()
    )
    differences += calls.differences
    return ReplayResult(
        run_id=run_id,
        identical=difference is None and report_matches,
        events=recording.count,
        first_difference=difference,
        report_matches=report_matches,
        report=recorded.report,
        differences=differences,
    )
