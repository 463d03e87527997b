"""Structural checks: schema, plan, trace order and chain, call/result linkage, links."""

from __future__ import annotations

from collections.abc import Callable

from toolproof.contract.layout import CLAIMS_FILE, PLAN_FILE, RUN_FILES, RUNTIME_FILE, TRACE_FILE
from toolproof.contract.runs import MODEL_PROVIDER_KIND, Finding, Severity, StepKind
from toolproof.contract.trace import (
    ClaimEmitted,
    EvidenceRegistered,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.identity import canonical_json
from toolproof.verify.base import MAX_FINDINGS, finding
from toolproof.verify.view import RunView

__all__ = ["check_call_linkage", "check_links", "check_plan", "check_schema", "check_trace_chain"]

_CRIT = Severity.CRITICAL


def check_schema(view: RunView) -> list[Finding]:
    """Every run file parses as its model, at a supported schema version, in canonical form."""
    return [
        finding(_CRIT, rel, view.problems[rel] + "; the file is damaged or not a toolproof run")
        for rel in RUN_FILES
        if rel in view.problems
    ]


def _compare_steps(view: RunView, bad: Callable[[str], None]) -> None:
    assert view.spec is not None and view.plan is not None and view.runtime is not None
    spec, plan = view.spec, view.plan
    kinds = (
        StepKind.CALL,
        StepKind.RETRIEVE,
        StepKind.MODEL,
        StepKind.READ,
        StepKind.PROMPT,
    )
    steps = [node for node in plan.nodes if node.kind in kinds]
    if sorted(node.id for node in steps) != sorted(step.id for step in spec.steps):
        bad("the plan's call/retrieve/model/read/prompt nodes are not the spec's steps")
    by_id = {node.id: node for node in steps}
    for step in spec.steps:
        node = by_id.get(step.id)
        if node is None:
            continue
        same = (
            node.kind.value == step.kind
            and node.tool == step.tool
            and node.arguments == step.arguments
            and node.params == step.params
            and set(step.after) <= set(node.depends_on)
        )
        if not same:
            bad(f"node {node.id!r} differs from the spec's step {step.id!r}")
    tools = {tool.name for tool in view.runtime.toolset.tools}
    for node in steps:
        if node.kind == StepKind.CALL and node.tool not in tools:
            bad(f"node {node.id!r} calls {node.tool!r}, which the runtime's toolset lacks")


def check_plan(view: RunView) -> list[Finding] | None:
    """The plan is the spec's: its steps, in a valid order, with the planner's own nodes."""
    spec, plan, runtime = view.spec, view.plan, view.runtime
    if spec is None or plan is None or runtime is None:
        return None
    out: list[Finding] = []

    def bad(message: str) -> None:
        out.append(finding(_CRIT, PLAN_FILE, message + "; re-run the spec to get a sound plan"))

    if plan.task != spec.task:
        bad("the plan's task differs from the spec's task")
    seen: set[str] = set()
    for node in plan.nodes:
        if node.id in seen:
            bad(f"node {node.id!r} appears twice")
        missing = [dep for dep in node.depends_on if dep not in seen]
        if missing:
            bad(f"node {node.id!r} depends on {missing}, which do not come before it")
        seen.add(node.id)
    expected_edges = sorted([dep, node.id] for node in plan.nodes for dep in node.depends_on)
    if plan.edges != expected_edges:
        bad("the plan's edges do not match its nodes' dependencies")
    _compare_steps(view, bad)
    tail = [(node.id, node.kind.value) for node in plan.nodes[-3:]]
    if tail != [("derive", "derive"), ("verify", "verify"), ("finalize", "finalize")]:
        bad("the plan does not end with the derive, verify and finalize nodes")
    if runtime.seed != spec.seed:
        out.append(
            finding(_CRIT, RUNTIME_FILE, f"runtime seed {runtime.seed} != spec seed {spec.seed}")
        )
    return out[:MAX_FINDINGS]


def _lifecycle(view: RunView, out: list[Finding]) -> None:
    order = {node.id: index for index, node in enumerate(view.plan.nodes)} if view.plan else None
    open_node: str | None = None
    started: set[str] = set()
    last_index = -1
    for event in view.events or []:
        where = {"event": event.idx}
        if order is not None and event.step not in order:
            out.append(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {event.idx} names unknown step {event.step!r} (not a plan node)",
                    **where,
                )
            )
        if isinstance(event, StepStarted):
            if open_node is not None or event.step in started:
                out.append(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx} starts step "
                        f"{event.step!r} while {open_node!r} is open or it ran before",
                        **where,
                    )
                )
            index = order.get(event.step, last_index) if order else last_index + 1
            if index <= last_index:
                out.append(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: step {event.step!r} starts out of plan order",
                        **where,
                    )
                )
            last_index = max(last_index, index)
            started.add(event.step)
            open_node = event.step
        elif isinstance(event, RunFailed):
            if open_node is not None:
                out.append(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: run_failed while step {open_node!r} is open",
                        **where,
                    )
                )
        elif event.step != open_node:
            out.append(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {event.idx} ({event.type}) belongs "
                    f"to step {event.step!r} but step {open_node!r} is open",
                    **where,
                )
            )
        if isinstance(event, StepFinished) and event.step == open_node:
            open_node = None


def check_trace_chain(view: RunView) -> list[Finding] | None:
    """``idx`` equals the position, ``prev`` is the digest of the line before, steps nest."""
    if view.events is None:
        return None
    out: list[Finding] = []
    previous: str | None = None
    for line in view.trace:
        event = line.event
        assert event is not None  # events is set only when every line parsed
        if event.idx != line.position:
            out.append(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event at line {line.position + 1} has "
                    f"idx {event.idx}, expected {line.position} (events were "
                    "removed, added or reordered)",
                    event=line.position,
                )
            )
        if event.prev != previous:
            out.append(
                finding(
                    _CRIT,
                    TRACE_FILE,
                    f"event {line.position} has prev "
                    f"{event.prev}, but the event before hashes to {previous} "
                    "(the hash chain is broken)",
                    event=line.position,
                )
            )
        previous = line.digest
    _lifecycle(view, out)
    return out[:MAX_FINDINGS]


def check_call_linkage(view: RunView) -> list[Finding] | None:
    """Each call id is its call's content id, and each call returns exactly once, next."""
    if view.events is None:
        return None
    out: list[Finding] = []
    tools = None
    if view.runtime is not None:
        tools = {tool.name for tool in view.runtime.toolset.tools}
        tools |= {p.name for p in view.runtime.providers if p.kind == MODEL_PROVIDER_KIND}
    pending: ToolCalled | None = None
    called: set[str] = set()

    def bad(idx: int, message: str) -> None:
        out.append(finding(_CRIT, TRACE_FILE, f"event {idx}: {message}", event=idx))

    for event in view.events:
        if pending is not None and not (
            isinstance(event, ToolReturned) and event.call_id == pending.call_id
        ):
            bad(pending.idx, f"call {pending.call_id} has no tool_returned right after it")
            pending = None
        if isinstance(event, ToolCalled):
            if event.call_id != event.call.id:
                bad(event.idx, f"call_id {event.call_id} is not the call's id {event.call.id}")
            if event.call.step != event.step:
                bad(event.idx, f"the call names step {event.call.step!r}, not {event.step!r}")
            if tools is not None and event.call.tool not in tools:
                bad(event.idx, f"tool {event.call.tool!r} is not in the runtime's toolset")
            if event.call_id in called:
                bad(event.idx, f"call {event.call_id} is made twice")
            called.add(event.call_id)
            pending = event
        elif isinstance(event, ToolReturned):
            if pending is None:
                bad(event.idx, f"tool_returned for {event.call_id} without a matching call")
            elif event.step != pending.step:
                bad(event.idx, "the result is recorded under another step than its call")
            pending = None
    if pending is not None:
        bad(pending.idx, f"call {pending.call_id} never returned")
    return out[:MAX_FINDINGS]


def check_links(view: RunView) -> list[Finding] | None:
    """Evidence names its call; claims cite registered evidence; claims.json is the trace's."""
    if view.events is None or view.claims is None:
        return None
    out: list[Finding] = []
    ok_calls: set[str] = set()
    registered: set[str] = set()
    emitted = []
    for event in view.events:
        if isinstance(event, ToolReturned) and event.result.ok:
            ok_calls.add(event.call_id)
        elif isinstance(event, EvidenceRegistered):
            source = event.evidence.source
            if source.step != event.step:
                out.append(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: evidence source "
                        f"step {source.step!r} is not {event.step!r}",
                        event=event.idx,
                    )
                )
            if source.kind == "tool_result" and source.call not in ok_calls:
                out.append(
                    finding(
                        _CRIT,
                        TRACE_FILE,
                        f"event {event.idx}: evidence names "
                        f"call {source.call}, which did not return a value before it",
                        event=event.idx,
                    )
                )
            registered.add(event.evidence.id)
        elif isinstance(event, ClaimEmitted):
            emitted.append(event.claim)
            for support in event.claim.supports:
                if support.evidence not in registered:
                    out.append(
                        finding(
                            _CRIT,
                            TRACE_FILE,
                            f"event {event.idx}: claim "
                            f"{event.claim.id} cites {support.evidence}, which is not "
                            "registered before it",
                            event=event.idx,
                        )
                    )
    stored = canonical_json([claim.to_json() for claim in view.claims])
    if stored != canonical_json([claim.to_json() for claim in emitted]):
        out.append(
            finding(
                _CRIT,
                CLAIMS_FILE,
                "claims.json differs from the claims emitted "
                "in trace.jsonl; one of them was altered",
            )
        )
    return out[:MAX_FINDINGS]
