"""A run, end to end: plan, execute, check, and land in ``<root>/runs/<run_id>``.

:func:`execute_run` plans the spec against the Toolset, executes it live, runs the
ordered checks over the files it wrote and commits the run directory atomically.
:func:`record_run` is the part shared with frozen replay: it writes ``spec.json``,
``plan.json``, ``runtime.json``, ``trace.jsonl``, ``evidence.pack`` and ``evidence.idx``,
``claims.json`` and ``report.json`` into a directory.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolproof.bundle.rundir import RUNS_DIR, CommittedRun, RunDirectoryWriter, write_file
from toolproof.bundle.trace import ParsedLines
from toolproof.contract.layout import (
    CLAIMS_FILE,
    PLAN_FILE,
    REPORT_FILE,
    RUNTIME_FILE,
    SPEC_FILE,
    TIMINGS_FILE,
    TRACE_FILE,
)
from toolproof.contract.runs import ExecutionRuntime, Plan, Report, RunSpec, Timings
from toolproof.contract.trace import TraceEvent
from toolproof.errors import RecordingError
from toolproof.evidence.reasoners import Reasoner
from toolproof.identity import canonical_json
from toolproof.plugins.registry import REGISTERED
from toolproof.runs.calls import CallPort, Clock, LiveCalls, LiveClock
from toolproof.runs.executor import ExecutionOutcome, Executor, StepHandler
from toolproof.runs.planner import plan_run
from toolproof.runs.providers import ProviderCalls, build_providers, provider_descriptors
from toolproof.runs.recorder import Recorder
from toolproof.runs.registries import RunRegistries
from toolproof.runs.retrieve import default_handlers
from toolproof.runs.runtime_plugin import RuntimePlugin
from toolproof.tools import hooks
from toolproof.tools.toolset import Toolset
from toolproof.verify.base import Check
from toolproof.verify.checks import CHECKS
from toolproof.verify.sequence import check_sequence, with_recorded
from toolproof.verify.verifier import Judged, judge
from toolproof.verify.view import RunView

__all__ = [
    "RecordedRun",
    "RunOutcome",
    "execute_run",
    "long_lived",
    "record_run",
    "step_kinds",
]


@dataclass(frozen=True)
class RecordedRun:
    """Files written by :func:`record_run`.

    Attributes:
        outcome: what the executor did.
        report: the report of the ordered checks.
        known: size and digest of every file written, by relative path.
        judged: the checks' judgement the report comes from, ``acted-once`` included
            (:func:`~toolproof.verify.verifier.judge`).

    """

    outcome: ExecutionOutcome
    report: Report
    known: dict[str, tuple[int, str]]
    judged: Judged

    def __repr__(self) -> str:
        # short on purpose, as RunOutcome's (asyncio reprs a finished task's result)
        outcome, files = self.report.outcome, len(self.known)
        return f"RecordedRun({self.outcome!r}, outcome={outcome!r}, files={files})"


@dataclass(frozen=True)
class RunOutcome:
    """A finished run.

    Attributes:
        run_id: ``run_<hex>``.
        path: ``<root>/runs/<run_id>``.
        report: the verification report written with it.
        reused: True when an identical run was already there.
        outcome: what the executor did (claims, failures, whether a budget stopped it).
        live_calls: tool calls made.

    """

    run_id: str
    path: Path
    report: Report
    reused: bool
    outcome: ExecutionOutcome
    live_calls: int

    def __repr__(self) -> str:
        # short on purpose: asyncio reprs a task's result, and a full repr of a large
        # run (every claim and step output) costs seconds
        return f"RunOutcome({self.run_id}, outcome={self.report.outcome!r}, reused={self.reused})"


_HELD = [0]
"""How deep :func:`long_lived` is entered while it owns the freeze (0: it does not)."""
_HOLDING = threading.Lock()


@contextmanager
def long_lived() -> Iterator[None]:
    """Keep the garbage collector's full collections off every object alive on entry.

    A run re-executed from a recording (a finalized session) holds the recording's
    parsed events, its spec and its plan from start to end; every full collection its
    own allocations trigger would walk them all again (about a third of a 10,000-call
    finalize's CPU). ``gc.freeze()`` on entry moves them out of the collector's sight;
    leaving the outermost ``long_lived`` gives them back (``gc.unfreeze()``: cycles
    among them are collected then, not lost). Entered again inside, it freezes what
    was allocated since too. Nothing is done when the process has frozen objects of
    its own (``gc.get_freeze_count()`` outside any ``long_lived``): unfreezing would
    undo its freeze.
    """
    with _HOLDING:
        owned = _HELD[0] > 0 or not gc.get_freeze_count()
        if owned:
            gc.freeze()
            _HELD[0] += 1
    try:
        yield
    finally:
        if owned:
            with _HOLDING:
                _HELD[0] -= 1
                if not _HELD[0]:
                    gc.unfreeze()


def step_kinds(handlers: Mapping[str, StepHandler] | None) -> set[str]:
    """The step kinds a runtime with ``handlers`` can execute."""
    return {"call", *(handlers or {})}


async def record_run(
    directory: Path,
    *,
    spec: RunSpec,
    plan: Plan,
    runtime: ExecutionRuntime,
    calls: CallPort,
    clock: Clock,
    reasoner: Reasoner,
    handlers: Mapping[str, StepHandler] | None = None,
    on_event: Callable[[TraceEvent], None] | None = None,
    durable: bool = True,
    checks: tuple[Check, ...] = CHECKS,
    adopt: Sequence[tuple[str, int, int]] = (),
    parsed: ParsedLines | None = None,
) -> RecordedRun:
    """Execute ``plan`` and write the run's files (all but timings and manifest) into ``directory``.

    ``durable=False`` skips fsync (frozen replay's scratch directory); ``checks`` is the
    check sequence (built-ins plus the spec's additional checks; ``policy`` joins it when
    ``runtime`` records a ``[policy]`` set); ``adopt`` lists the
    items of an ``evidence.pack`` already in ``directory`` (a finalized session's, copied)
    that the run stores in that order, taken as they lie instead of written again;
    ``parsed`` are trace lines the run's trace is expected to repeat, already parsed
    (a finalized session's live trace): the checks take each line whose bytes match
    instead of parsing it again (:class:`~toolproof.verify.view.RunView`).

    Raises:
        CanonicalizationError: a recorded value has no canonical JSON form.

    """
    checks = with_recorded(checks, runtime.toolset.policy is not None)  # docs/policy.md
    known: dict[str, tuple[int, str]] = {}
    for name, model in ((SPEC_FILE, spec), (PLAN_FILE, plan), (RUNTIME_FILE, runtime)):
        known[name] = write_file(directory / name, canonical_json(model.to_json()), sync=durable)
    recorder = Recorder(directory, on_event=on_event, adopt=adopt)
    store = recorder.store
    try:
        executor = Executor(
            spec=spec,
            plan=plan,
            calls=calls,
            clock=clock,
            reasoner=reasoner,
            recorder=recorder,
            handlers=handlers,
            check_ids=[check.id for check in checks],
        )
        outcome = await executor.run()
    finally:
        known[TRACE_FILE] = recorder.close(sync=durable)
    known.update(store.stored_files())  # a file rewritten after it was stored is hashed again
    claims = canonical_json([claim.to_json() for claim in outcome.claims])
    known[CLAIMS_FILE] = write_file(directory / CLAIMS_FILE, claims, sync=durable)
    digests = {path: file_digest for path, (_, file_digest) in known.items()}
    sizes = {path: size for path, (size, _) in known.items()}
    view = RunView(directory, digests, sizes, parsed=parsed)
    judged = judge(view, checks, spec.policy)  # as verify judges the committed run
    report_bytes = canonical_json(judged.stored.to_json())
    known[REPORT_FILE] = write_file(directory / REPORT_FILE, report_bytes, sync=durable)
    return RecordedRun(outcome, judged.stored, known, judged)


async def execute_run(
    spec: RunSpec,
    *,
    root: Path,
    toolset: Toolset,
    handlers: Mapping[str, StepHandler] | None = None,
    on_event: Callable[[TraceEvent], None] | None = None,
    on_plan: Callable[[Plan], None] | None = None,
    runtime: RuntimePlugin | str | None = None,
    registries: RunRegistries | None = None,
) -> RunOutcome:
    """Plan, execute live, check, and commit a run directory under ``<root>/runs/``.

    Args:
        spec: the run spec.
        root: the artifact root.
        toolset: the sealed Toolset of the spec's composition root.
        handlers: step handlers by kind (default: :func:`default_handlers`, ``retrieve``).
        on_event: called with each trace event (progress).
        on_plan: called with the plan before execution starts (progress).
        runtime: an execution-runtime plugin (or its name in ``registries.runtimes``)
            that makes the calls; default the local runtime (:class:`LiveCalls`).
        registries: where the spec's reasoner and checks and a runtime name resolve
            (default: ``RunRegistries()``, the built-ins and the installed entry points).

    Returns:
        The :class:`RunOutcome`. A failing report is not an exception: look at
        ``report.outcome``.

    Raises:
        InputError: the spec cannot be planned (unknown tool, cycle...), the reasoner
            parameters are invalid (or a provider it needs reuses a tool's name), or a
            reasoner or check plugin is unknown or broken (the message names it and the
            reason); nothing is written.
        RecordingError: the run cannot be written (a full disk: the message names the
            path and the error); the temporary directory is removed, nothing lands under
            ``runs/``.

    """
    if handlers is None:
        handlers = default_handlers(catalog=toolset.catalog)
    registries = registries if registries is not None else RunRegistries()
    reasoner = registries.reasoners.create(spec.reasoner)
    checks, check_descriptors = check_sequence(spec.checks, registries.checks)
    plugin, origin = (
        registries.runtimes.create(runtime) if isinstance(runtime, str) else (runtime, REGISTERED)
    )
    needs = reasoner.providers()
    providers = build_providers(needs, taken=toolset.names())
    descriptor = toolset.descriptor()
    plan = plan_run(spec, descriptor, step_kinds=step_kinds(handlers))
    if on_plan is not None:
        on_plan(plan)
    recorded_runtime = ExecutionRuntime(
        kind=plugin.kind if plugin is not None else "local",
        mode="live",
        toolset=descriptor,
        reasoner=reasoner.descriptor(),
        seed=spec.seed,
        checks=check_descriptors,
        providers=sorted(
            ([plugin.descriptor(origin)] if plugin is not None else [])
            + provider_descriptors(needs),
            key=lambda d: (d.kind, d.name),
        ),
    )
    started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    started = time.monotonic()
    calls: CallPort = plugin.calls(toolset) if plugin is not None else LiveCalls(toolset)
    if providers:
        calls = ProviderCalls(calls, providers)
    attributes: dict[str, str | int] = {"toolproof.plan_id": plan.id}
    try:
        with hooks.span("toolproof.run", attributes) as span:
            committed, recorded = await _record_and_commit(
                root,
                spec,
                plan,
                recorded_runtime,
                calls,
                reasoner,
                handlers,
                on_event,
                checks,
                started_at,
                started,
            )
            span.set_attribute("toolproof.run_id", committed.run_id)
            span.set_attribute("toolproof.report.outcome", str(recorded.report.outcome))
    except OSError as exc:
        raise RecordingError(
            f"run not recorded: {exc.strerror or exc}: {exc.filename or root}; nothing was "
            f"written under {Path(root) / RUNS_DIR}",
            path=str(exc.filename or root),
        ) from exc
    return RunOutcome(
        committed.run_id,
        committed.path,
        recorded.report,
        committed.reused,
        recorded.outcome,
        int(getattr(calls, "live_calls", 0)),
    )


async def _record_and_commit(
    root: Path,
    spec: RunSpec,
    plan: Plan,
    runtime: ExecutionRuntime,
    calls: CallPort,
    reasoner: Reasoner,
    handlers: Mapping[str, StepHandler] | None,
    on_event: Callable[[TraceEvent], None] | None,
    checks: tuple[Check, ...],
    started_at: str,
    started: float,
) -> tuple[CommittedRun, RecordedRun]:
    """Record the run in a temporary directory and commit it (removed on any error)."""
    with RunDirectoryWriter(root) as writer:
        recorded = await record_run(
            writer.temp,
            spec=spec,
            plan=plan,
            runtime=runtime,
            calls=calls,
            clock=LiveClock(spec.budgets.wall_seconds),
            reasoner=reasoner,
            handlers=handlers,
            on_event=on_event,
            checks=checks,
        )
        writer.known.update(recorded.known)
        timings = Timings(
            started_at=started_at,
            wall_seconds=round(time.monotonic() - started, 6),
            steps=recorded.outcome.step_seconds,
        )
        writer.write_json(TIMINGS_FILE, timings)
        return writer.commit(), recorded
