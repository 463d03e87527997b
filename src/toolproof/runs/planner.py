"""The planner: a spec becomes a content-addressed :class:`Plan`, or is refused.

Nodes: one per spec step (``call`` or ``retrieve``), then ``derive`` (depends on every
step), ``verify`` (on ``derive``) and ``finalize`` (on ``verify``). A step depends on
the steps in its ``after`` list and on every step its arguments reference. The
order is a topological sort that keeps the spec's order wherever dependencies allow
(Kahn's algorithm, ties broken by position in the spec), so the same spec always
gives the same plan and plan id. Duplicate ids, unknown dependencies, cycles, unknown
tools and step kinds nobody can run are refused before anything runs.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from typing import Any

from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.runs import Plan, PlanNode, RunSpec, StepKind, StepSpec
from toolproof.contract.tools import ToolsetDescriptor
from toolproof.errors import InputError
from toolproof.evidence.encoding import parse_ref
from toolproof.identity import content_id
from toolproof.runs.spec import iter_refs

__all__ = ["PLANNER", "plan_run"]

PLANNER = "toolproof.planner/1"
"""The planner's name and version, recorded in every plan."""


def _dependencies(spec: RunSpec) -> dict[str, list[str]]:
    ids = [step.id for step in spec.steps]
    seen: set[str] = set()
    for step_id in ids:
        if step_id in seen:
            raise InputError(f"step id {step_id!r} is used twice (rule: step ids are unique)")
        seen.add(step_id)
    deps: dict[str, list[str]] = {}
    for step in spec.steps:
        wanted = list(step.after) + [parse_ref(ref)[0] for ref in iter_refs(step.arguments)]
        for dep in wanted:
            if dep not in seen:
                raise InputError(
                    f"step {step.id!r} depends on unknown step {dep!r} (known: {', '.join(ids)})",
                    step=step.id,
                )
        deps[step.id] = sorted(set(wanted))
    return deps


def _order(spec: RunSpec, deps: dict[str, list[str]]) -> list[str]:
    position = {step.id: index for index, step in enumerate(spec.steps)}
    waiting = {step_id: len(needs) for step_id, needs in deps.items()}
    users: dict[str, list[str]] = {step_id: [] for step_id in deps}
    for step_id, needs in deps.items():
        for dep in needs:
            users[dep].append(step_id)
    ready = [(position[sid], sid) for sid, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, chosen = heapq.heappop(ready)
        order.append(chosen)
        for user in users[chosen]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) < len(deps):
        placed = set(order)
        cycle = sorted((sid for sid in deps if sid not in placed), key=lambda sid: position[sid])
        raise InputError(
            f"steps {cycle} form a dependency cycle (rule: a step can only use results "
            "of steps that finish before it)",
            steps=cycle,
        )
    return order


def plan_run(
    spec: RunSpec,
    toolset: ToolsetDescriptor,
    *,
    step_kinds: Collection[str] = ("call",),
) -> Plan:
    """Plan a spec against a Toolset descriptor.

    Args:
        spec: the run spec.
        toolset: the descriptor of the Toolset the run will call.
        step_kinds: the step kinds this runtime can execute (``retrieve`` needs a
            retrieval step handler).

    Returns:
        The :class:`Plan`; its id is the content id of everything in it.

    Raises:
        InputError: duplicate ids, an unknown dependency, a cycle, an unknown tool, a
            tool the toolset hides (``exposure``: the ungated sibling of an
            ``approve``-gated variant), or a step kind with no handler; the message
            names the step.

    """
    deps = _dependencies(spec)
    hidden = set(toolset.exposure.hidden) if toolset.exposure is not None else set()
    tools = {tool.name for tool in toolset.tools} - hidden
    for step in spec.steps:
        if step.kind not in step_kinds:
            raise InputError(
                f"step {step.id!r} is a {step.kind!r} step, but no {step.kind} runtime is "
                f"configured for this run (available: {', '.join(sorted(step_kinds))})",
                step=step.id,
            )
        if step.kind == "call" and step.tool in hidden:
            raise InputError(
                f"step {step.id!r} calls tool {step.tool!r}, which this toolset does not "
                "expose (an ungated sibling of an approve-gated variant: call the gated "
                "variant or name it in [serve] expose; or hidden by [serve] hide)",
                step=step.id,
                tool=step.tool,
                rule="exposure",
            )
        if step.kind == "call" and step.tool not in tools:
            raise InputError(
                f"step {step.id!r} calls unknown tool {step.tool!r} "
                f"(the toolset has: {', '.join(sorted(tools)) or 'no tools'})",
                step=step.id,
                tool=step.tool,
            )
    by_id = {step.id: step for step in spec.steps}
    nodes = [_spec_node(by_id[step_id], deps[step_id]) for step_id in _order(spec, deps)]
    nodes.append(PlanNode(id="derive", kind=StepKind.DERIVE, depends_on=sorted(by_id)))
    nodes.append(PlanNode(id="verify", kind=StepKind.VERIFY, depends_on=["derive"]))
    nodes.append(PlanNode(id="finalize", kind=StepKind.FINALIZE, depends_on=["verify"]))
    edges = sorted([dep, node.id] for node in nodes for dep in node.depends_on)
    plain = {
        "schema_version": SCHEMA_VERSION,
        "planner": PLANNER,
        "task": spec.task,
        "nodes": [_node_json(node) for node in nodes],
        "edges": edges,
    }
    fields = {
        "schema_version": SCHEMA_VERSION,
        "id": content_id(Plan.ID_KIND, plain),
        "planner": PLANNER,
        "task": spec.task,
        "nodes": nodes,
        "edges": edges,
    }
    return Plan.model_validate(fields)


def _spec_node(step: StepSpec, depends_on: list[str]) -> PlanNode:
    """The plan node of a validated spec step, with its sorted dependency ids."""
    return PlanNode.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "id": step.id,
            "kind": StepKind(step.kind),
            "tool": step.tool,
            "arguments": step.arguments,
            "params": step.params,
            "depends_on": depends_on,
        }
    )


def _node_json(node: PlanNode) -> dict[str, Any]:
    """``node.model_dump(mode="json")``, read off its fields (JSON values already)."""
    return {
        "schema_version": node.schema_version,
        "id": node.id,
        "kind": node.kind.value,
        "tool": node.tool,
        "arguments": node.arguments,
        "params": node.params,
        "depends_on": node.depends_on,
    }
