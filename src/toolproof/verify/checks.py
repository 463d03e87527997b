"""The ordered check sequence and the report it produces.

The sequence is part of the verification contract: its ids, in order, are in every
report, and the report id covers them, so adding or reordering a check changes
report identity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from toolproof.contract.runs import CheckResult, Finding, Policy, Report, Severity
from toolproof.verify.approvals import STREAMS as APPROVAL_STREAMS
from toolproof.verify.approvals import check_approvals
from toolproof.verify.base import Check, TraceState
from toolproof.verify.failures import STREAMS as FAILURE_STREAMS
from toolproof.verify.failures import check_failure_honesty
from toolproof.verify.provenance import STREAMS as PROVENANCE_STREAMS
from toolproof.verify.provenance import (
    check_budget,
    check_evidence_digests,
    check_finalize,
    check_grounding,
    check_required_steps,
)
from toolproof.verify.spans import check_support_spans
from toolproof.verify.structure import STREAMS as STRUCTURE_STREAMS
from toolproof.verify.structure import (
    check_call_linkage,
    check_links,
    check_plan,
    check_schema,
    check_trace_chain,
)
from toolproof.verify.view import RunView

__all__ = ["CHECKS", "CHECK_SEQUENCE", "check_findings", "report_of", "run_checks"]

_C, _E = Severity.CRITICAL, Severity.ERROR

_BUILT_IN: tuple[Check, ...] = (
    Check(
        "schema",
        "INV-SCHEMA",
        _C,
        "spec, plan, runtime, trace and claims parse as their models, canonical, supported "
        "schema_version, content ids recomputed",
        check_schema,
    ),
    Check(
        "plan",
        "INV-PLAN",
        _C,
        "the plan is the spec's steps in a valid order plus derive/verify/finalize; every "
        "called tool is in the runtime's toolset",
        check_plan,
    ),
    Check(
        "trace-chain",
        "INV-TRACE-CHAIN",
        _C,
        "idx equals position, prev is the digest of the previous line, steps start in plan "
        "order and events nest inside their step",
        check_trace_chain,
    ),
    Check(
        "call-linkage",
        "INV-CALL-RESULT",
        _C,
        "each call id is the content id of its ToolCall and is answered by exactly one "
        "tool_returned, right after it",
        check_call_linkage,
    ),
    Check(
        "support-links",
        "INV-SUPPORT-RESOLVE",
        _C,
        "evidence names the call that produced it, in its step; claim supports name evidence "
        "registered before the claim; claims.json equals the emitted claims",
        check_links,
    ),
    Check(
        "grounding",
        "INV-DERIVED-GROUNDED",
        _E,
        "a validated claim is derived, has min_supports supports, and every citation quotes "
        "its support's bytes exactly; an answer's details (grounding level details) are "
        "re-derived from the stored bytes",
        check_grounding,
    ),
    Check(
        "evidence-digests",
        "INV-EVIDENCE-DIGEST",
        _C,
        "every evidence file is registered, named by its SHA-256, with the recorded size, "
        "digest and (for tool results) value",
        check_evidence_digests,
    ),
    Check(
        "support-spans",
        "INV-SUPPORT-SPAN",
        _C,
        "every support interval is within its evidence file and its bytes hash to the "
        "recorded snippet digest",
        check_support_spans,
    ),
    Check(
        "required-steps",
        "INV-STEPS-COMPLETE",
        _E,
        "every plan node ran and finished ok (failed or skipped steps are warnings)",
        check_required_steps,
    ),
    Check(
        "finalize",
        "INV-FINALIZE",
        _E,
        "the trace ends with the finalize step, finished ok",
        check_finalize,
    ),
    Check(
        "budget",
        "INV-BUDGET",
        _E,
        "tool calls and evidence bytes within the spec's budgets; no budget stop recorded",
        check_budget,
    ),
    Check(
        "failure-honesty",
        "INV-FAILURE-HONEST",
        _E,
        "no call returns a value after one of its layers reported a failure that is not "
        "retryable; a step with a failed call does not finish ok",
        check_failure_honesty,
    ),
    Check(
        "approvals",
        "INV-APPROVAL-BOUND",
        _C,
        "every call of a gated tool that ran has an approving decision for its call id and "
        "argument digest before its tool_called; a denied call never ran",
        check_approvals,
    ),
)

_STREAMS: dict[str, Callable[[RunView], TraceState | None]] = {
    **STRUCTURE_STREAMS,
    **PROVENANCE_STREAMS,
    **FAILURE_STREAMS,
    **APPROVAL_STREAMS,
}

CHECKS: tuple[Check, ...] = tuple(
    dataclasses.replace(check, stream=_STREAMS.get(check.id)) for check in _BUILT_IN
)
"""The built-in checks, in the order they run (those that read the trace stream it)."""

CHECK_SEQUENCE: tuple[str, ...] = tuple(check.id for check in CHECKS)
"""The check ids in order (recorded by the plan's ``verify`` node and in every report)."""


def check_findings(
    view: RunView,
    checks: Sequence[Check] = CHECKS,
    *,
    progress: Callable[[int], None] | None = None,
) -> list[list[Finding] | None]:
    """Run ``checks`` over a run directory: one pass over the trace, then each in order.

    Every check with a ``stream`` gets its state fed each line of ``trace.jsonl`` in
    that single pass (:meth:`RunView.scan`); the others run on the view afterwards.

    Args:
        view: the parsed run directory (its trace not read yet).
        checks: the sequence.
        progress: called with the number of bytes of each block of the trace read.

    Returns:
        Each check's findings, in order; ``None`` for a check that could not run (an
        input it needs did not parse, or, for a streaming check, a trace line).

    """
    states: dict[str, TraceState | None] = {
        check.id: check.stream(view) for check in checks if check.stream is not None
    }
    view.scan([state.feed for state in states.values() if state is not None], progress=progress)
    results: list[list[Finding] | None] = []
    for check in checks:
        if check.stream is None:
            results.append(check.run(view))
            continue
        state = states[check.id]
        results.append(state.finish() if state is not None and view.trace_ok else None)
    return results


def report_of(
    checks: Sequence[Check], findings: Sequence[list[Finding] | None], policy: Policy
) -> Report:
    """The report of ``checks`` given each one's findings (``None``: skipped), under ``policy``.

    Returns:
        The :class:`Report`; ``outcome`` is ``failed`` when any finding's severity
        fails under ``policy``.

    """
    results = []
    failed = False
    for check, found in zip(checks, findings, strict=True):
        if found is None:
            results.append(
                CheckResult(
                    check=check.id,
                    invariant=check.invariant,
                    severity=check.severity,
                    status="skipped",
                )
            )
            continue
        failed = failed or any(policy.fails(item.severity) for item in found)
        results.append(
            CheckResult(
                check=check.id,
                invariant=check.invariant,
                severity=check.severity,
                status="failed" if found else "passed",
                findings=found,
            )
        )
    return Report(
        policy=policy,
        sequence=[check.id for check in checks],
        results=results,
        outcome="failed" if failed else "passed",
    )


def run_checks(view: RunView, policy: Policy, checks: tuple[Check, ...] = CHECKS) -> Report:
    """Run ``checks`` in order over a run directory and build the report.

    Args:
        view: the parsed run directory.
        policy: which severities fail the report.
        checks: the sequence (the built-in one unless a caller adds checks).

    Returns:
        The :class:`Report`; ``outcome`` is ``failed`` when any finding's severity
        fails under ``policy``.

    """
    return report_of(checks, check_findings(view, checks), policy)
