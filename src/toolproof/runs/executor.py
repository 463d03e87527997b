"""The executor: walks a plan in order and records every event in the hash-chained trace.

Per node: ``step_started``; for a call, the call block of
:class:`~toolproof.runs.recorder.Recorder` (``tool_called`` / ``tool_returned`` /
``failure_observed`` / ``evidence_registered``, the one emitter runs and sessions
share); for ``derive``, one
``claim_emitted`` per claim; then ``step_finished`` with ``ok``, ``failed`` (a tool
failure, a bad reference) or ``skipped`` (a dependency did not finish ok). A failed
step does not stop the run; the reasoner sees it and reports insufficient evidence.

Budgets are checked while running, at fixed points so frozen replay meets them at
the same events: the wall clock before each node (and a running call is cancelled
when it runs out), tool calls before each call, evidence bytes before each
registration. Exceeding one finishes the current step as ``failed``, records a
``run_failed`` event and goes straight to ``finalize`` (finished ``failed``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, NoReturn, Protocol

from toolproof.contract.evidence import (
    Claim,
    ClaimStatus,
    ClaimType,
    EvidenceRecord,
    evidence_id_for,
)
from toolproof.contract.runs import Plan, PlanNode, RunSpec, StepKind
from toolproof.contract.tools import ToolCall, ToolResult
from toolproof.contract.trace import (
    ClaimEmitted,
    RunFailed,
    StepFinished,
    StepStarted,
)
from toolproof.errors import InputError
from toolproof.evidence.encoding import read_contents
from toolproof.evidence.reasoners import Reasoner, ReasonerRequest, StepOutput
from toolproof.identity import canonical_json, digest
from toolproof.runs.calls import CallPort, Clock
from toolproof.runs.outcome import ExecutionOutcome
from toolproof.runs.recorder import ModelExchange, Recorder, call_json, failure_reason
from toolproof.runs.spec import RefError, resolve_refs
from toolproof.tools import hooks
from toolproof.verify.checks import CHECK_SEQUENCE

__all__ = ["ExecutionOutcome", "Executor", "StepContext", "StepHandler"]


_HANDLED_KINDS = (StepKind.RETRIEVE, StepKind.MODEL, StepKind.READ, StepKind.PROMPT)
"""Spec step kinds a :class:`StepHandler` runs (by its kind's name)."""
_SPEC_KINDS = (StepKind.CALL, StepKind.RETRIEVE, StepKind.READ, StepKind.PROMPT)
"""Step kinds skipped when a dependency did not finish ok."""


class _BudgetStop(Exception):
    def __init__(self, budget: str, limit: float, used: float, message: str) -> None:
        super().__init__(message)
        self.budget, self.limit, self.used, self.message = budget, limit, used, message


class StepContext:
    """What a step handler (e.g. retrieval) gets to do its step.

    Attributes:
        node: the plan node being run.
        mode: ``live`` or ``frozen`` (a frozen handler must not reach outside the run).
        store: the run's evidence store.
        values: the value of every step that finished ok so far, by step id.

    """

    def __init__(self, executor: Executor, node: PlanNode) -> None:
        self._executor = executor
        self.node = node
        self.mode = executor.calls.mode
        self.store = executor.recorder.store
        self.values: Mapping[str, Any] = executor.values

    def register_evidence(
        self,
        data: bytes,
        *,
        media_type: str,
        kind: str = "chunk",
        detail: dict[str, Any] | None = None,
    ) -> EvidenceRecord:
        """Store ``data`` exactly as evidence of this step and record ``evidence_registered``.

        Args:
            data: the exact bytes supports will cite (e.g. a chunk's bytes).
            media_type: their media type.
            kind: the source kind (``chunk``).
            detail: provenance (``document``, ``document_digest``, ``chunk``,
                ``document_start``/``document_end``); supports never use these offsets.

        Returns:
            The record; cite inside it with ``store.support(record.id, start, end)``, offsets
            counted from the first byte of ``data``.

        """
        return self._executor.register(self.node.id, data, media_type, kind, None, detail or {})

    def record_model_turn(self, turn: ModelExchange) -> tuple[EvidenceRecord, ...]:
        """Record a model turn for this (``model``) step: its bytes, then ``model_turn``.

        Every byte string (request, response, streamed bytes) counts against the
        evidence budget.

        Returns:
            The request's, the response's and (a framework's stream) the streamed
            bytes' evidence records.

        """
        return self._executor.model_turn(self.node.id, turn)

    def record_read(self, uri: str, result: dict[str, Any]) -> list[EvidenceRecord]:
        """Record this step's ``resource_read`` and its contents' evidence (kind ``resource``).

        Returns:
            One evidence record per content item (see
            :meth:`~toolproof.runs.recorder.Recorder.read_block`).

        Raises:
            _BudgetStop: the evidence-bytes budget is spent.

        """
        for data, _, _ in read_contents(result):
            self._executor._admit(self.node.id, data)
        records = self._executor.recorder.read_block(self.node.id, uri, result)
        self._executor.evidence.extend(records)
        return records

    def record_prompt(
        self, name: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> list[EvidenceRecord]:
        """Record this step's ``prompt_got`` and its evidence (kind ``prompt``).

        Raises:
            _BudgetStop: the evidence-bytes budget is spent.

        """
        self._executor._admit(self.node.id, canonical_json(result))
        records = self._executor.recorder.prompt_block(self.node.id, name, arguments, result)
        self._executor.evidence.extend(records)
        return records

    async def call_tool(
        self, tool: str, arguments: dict[str, Any]
    ) -> tuple[ToolResult, EvidenceRecord | None]:
        """Call a tool for this step exactly as a ``call`` step does.

        The call is recorded (``tool_called``/``tool_returned``), counts against the
        tool-call budget, is served from the record in frozen replay, and a successful
        value is registered as ``tool_result`` evidence.

        Returns:
            The result and, on success, the evidence record of its value.

        """
        return await self._executor.tool_call(self.node.id, tool, arguments)


class StepHandler(Protocol):
    """Runs one node of a kind the executor does not know (``retrieve``)."""

    async def __call__(self, node: PlanNode, context: StepContext) -> StepOutput:
        """Run the step; return its output (``ok=False`` with ``reason`` on failure)."""
        ...


class Executor:
    """Runs a plan; see the module docstring.

    Args:
        spec: the run spec (budgets, assumptions, task).
        plan: the plan to run.
        calls: live or frozen tool calls.
        clock: live or frozen wall clock.
        reasoner: the reasoner of the ``derive`` node.
        recorder: the run's recorder (trace and evidence store).
        handlers: step handlers by node kind (``retrieve``).
        check_ids: the check sequence recorded by the ``verify`` node (default: the
            built-in one).

    """

    def __init__(
        self,
        *,
        spec: RunSpec,
        plan: Plan,
        calls: CallPort,
        clock: Clock,
        reasoner: Reasoner,
        recorder: Recorder,
        handlers: Mapping[str, StepHandler] | None = None,
        check_ids: Sequence[str] = CHECK_SEQUENCE,
    ) -> None:
        self.spec, self.plan, self.calls, self.clock = spec, plan, calls, clock
        self.check_ids = tuple(check_ids)
        self.reasoner, self.recorder = reasoner, recorder
        self.store = recorder.store
        self.handlers = dict(handlers or {})
        self.outcome = ExecutionOutcome()
        self.values: dict[str, Any] = {}
        self.evidence: list[EvidenceRecord] = []
        self.tool_calls = 0
        self.model_calls: dict[str, str] = {}  # step -> the id the agent's model gave its call

    def _emit(self, cls: type[Any], **fields: Any) -> None:
        self.recorder.emit(cls, **fields)

    def _finish(self, node_id: str, status: str, **detail: Any) -> None:
        self._emit(StepFinished, step=node_id, status=status, detail=detail)

    def _fail(self, node_id: str, reason: str, **extra: Any) -> None:
        self.outcome.outputs[node_id] = StepOutput(node_id, False, reason=reason)
        self.outcome.failures.append({"step": node_id, "reason": reason, **extra})
        self._finish(node_id, "failed", reason=reason)

    def register(
        self,
        node_id: str,
        data: bytes,
        media_type: str,
        kind: str,
        call: str | None,
        detail: dict[str, Any],
    ) -> EvidenceRecord:
        """Store evidence within the evidence-bytes budget and record the event.

        Raises:
            _BudgetStop: the bytes would exceed the budget (the step is finished failed).

        """
        self._admit(node_id, data)
        plain = self.recorder.register(node_id, data, media_type, kind, call, detail)
        record = EvidenceRecord.model_validate(plain)
        self.evidence.append(record)
        return record

    def model_turn(self, node_id: str, turn: ModelExchange) -> tuple[EvidenceRecord, ...]:
        """Record a model turn of step ``node_id`` within the evidence budget.

        Raises:
            _BudgetStop: the bytes would exceed the budget (the step is finished failed).

        """
        self._admit(node_id, turn.request + turn.response + (turn.stream or b""))
        records = tuple(
            EvidenceRecord.model_validate(plain)
            for plain in self.recorder.model_block(node_id, turn)
        )
        self.evidence.extend(records)
        return records

    def _admit(self, node_id: str, data: bytes) -> None:
        limit = self.spec.budgets.evidence_bytes
        if limit is None:
            return
        used = self.store.total_bytes + len(data)
        if used > limit:
            evidence_id = evidence_id_for(digest(data))
            used -= len(data) if evidence_id in self.store else 0  # stored once per digest
        if used > limit:
            message = f"evidence budget of {limit} bytes exceeded ({used} bytes needed)"
            self._fail(node_id, message, budget="evidence_bytes")
            raise _BudgetStop("evidence_bytes", limit, used, message)

    async def run(self) -> ExecutionOutcome:
        """Run every node in plan order, then ``finalize``; return what happened."""
        for node in self.plan.nodes:
            if node.kind == StepKind.FINALIZE:
                break
            if self.clock.exceeded(self.recorder.count):
                limit = self.spec.budgets.wall_seconds or 0.0
                message = f"wall-clock budget of {limit} s ran out before step {node.id!r}"
                self._stop(node.id, _BudgetStop("wall_seconds", limit, limit, message))
                break
            started = time.monotonic()
            attributes = {"toolproof.step": node.id, "toolproof.step.kind": node.kind.value}
            try:
                with hooks.span(f"toolproof.step {node.id}", attributes):
                    await self._node(node)
            except _BudgetStop as stop:
                self._stop(node.id, stop)
            finally:
                self.outcome.step_seconds[node.id] = round(time.monotonic() - started, 6)
            if self.outcome.stopped:
                break
        self._finalize()
        return self.outcome

    def _stop(self, node_id: str, stop: _BudgetStop) -> None:
        self.outcome.stopped = True
        self.outcome.failures.append(
            {"step": node_id, "reason": stop.message, "budget": stop.budget}
        )
        detail = {"budget": stop.budget, "limit": stop.limit, "used": stop.used}
        self._emit(RunFailed, step=node_id, reason="budget", message=stop.message, detail=detail)

    async def _node(self, node: PlanNode) -> None:
        self._emit(StepStarted, step=node.id, kind=node.kind.value)
        if node.kind in _SPEC_KINDS:
            blocked = self._blocked(node)
            if blocked is not None:
                self._skip(node, blocked)
                return
        if node.kind == StepKind.CALL:
            await self._call(node)
        elif node.kind in _HANDLED_KINDS:
            await self._handled(node)
        elif node.kind == StepKind.DERIVE:
            await self._derive(node)
        else:
            self.outcome.outputs[node.id] = StepOutput(node.id, True)
            self._finish(node.id, "ok", checks=list(self.check_ids))

    def _blocked(self, node: PlanNode) -> str | None:
        """The first dependency of ``node`` that did not finish ok, or ``None``."""
        if not node.depends_on:  # most call steps: no generator to build
            return None
        outputs = self.outcome.outputs
        return next((dep for dep in node.depends_on if not outputs[dep].ok), None)

    def _skip(self, node: PlanNode, blocked: str) -> None:
        """Finish ``node`` as ``skipped`` because dependency ``blocked`` did not finish ok."""
        reason = f"dependency {blocked!r} did not finish ok"
        self.outcome.outputs[node.id] = StepOutput(node.id, False, reason=reason)
        self._finish(node.id, "skipped", reason=reason)

    async def _call(self, node: PlanNode) -> None:
        try:
            arguments = resolve_refs(node.arguments, self.values)
        except RefError as exc:
            self._fail(node.id, exc.message)
            return
        result, record = await self.tool_call(node.id, node.tool or "", arguments)
        if result.failure is not None or record is None:
            return
        self.values[node.id] = result.value
        self.outcome.outputs[node.id] = StepOutput(
            node.id,
            True,
            result.value,
            (record,),
            arguments=arguments,
            model_call_id=self.model_calls.get(node.id),
        )
        self._finish(node.id, "ok", evidence=record.id)

    def _spent(self, node_id: str, limit: int, finish: bool) -> NoReturn:
        """Stop on the spent tool-call budget ``limit`` (the step failed first when ``finish``).

        Raises:
            _BudgetStop: always.

        """
        message = f"tool-call budget of {limit} calls spent before step {node_id!r}"
        if finish:
            self._fail(node_id, message, budget="tool_calls")
        raise _BudgetStop("tool_calls", limit, self.tool_calls + 1, message)

    async def tool_call(
        self, node_id: str, tool: str, arguments: dict[str, Any], *, finish: bool = True
    ) -> tuple[ToolResult, EvidenceRecord | None]:
        """Make one recorded tool call for step ``node_id``; see :meth:`StepContext.call_tool`.

        A failed call finishes the step as ``failed`` (``step_finished`` recorded) unless
        ``finish`` is False (a reasoner's provider call: the failure is recorded, the
        reasoner decides).

        Raises:
            _BudgetStop: the tool-call or evidence budget is spent.

        """
        limit = self.spec.budgets.tool_calls
        if limit is not None and self.tool_calls >= limit:
            self._spent(node_id, limit, finish)
        # the body gets a copy of the arguments (parsed back from their canonical JSON) and
        # may mutate it: the call is recorded from the plain JSON made now
        plain = call_json(tool, arguments, node_id, copy=True)
        call = ToolCall.model_construct(**plain)
        self.tool_calls += 1
        observed = await self.calls.call(call, self.clock.remaining())
        budget = self.spec.budgets.evidence_bytes is not None
        admit = partial(self._admit, node_id) if budget else None
        recorded = self.recorder.call_block(node_id, plain, observed, admit=admit)
        if observed.origin is not None and "model_call_id" in observed.origin:
            self.model_calls[node_id] = observed.origin["model_call_id"]
        if recorded.evidence_json is None:
            assert recorded.result.failure is not None
            reason = failure_reason(recorded.result.failure)
            if finish:
                self._fail(node_id, reason, call=call.id)
            else:
                self.outcome.failures.append({"step": node_id, "reason": reason, "call": call.id})
            return recorded.result, None
        record = recorded.evidence
        assert record is not None
        self.evidence.append(record)
        return recorded.result, record

    async def _handled(self, node: PlanNode) -> None:
        handler = self.handlers.get(node.kind.value)
        if handler is None:
            self._fail(node.id, f"no handler for {node.kind.value} steps in this runtime")
            return
        try:
            output = await handler(node, StepContext(self, node))
        except InputError as exc:
            self._fail(node.id, exc.message)
            return
        if node.id in self.outcome.outputs:
            return  # a failed call inside the handler already finished the step
        self.outcome.outputs[node.id] = output
        if not output.ok:
            self.outcome.failures.append({"step": node.id, "reason": output.reason})
            self._finish(node.id, "failed", reason=output.reason)
            return
        self.values[node.id] = output.value
        self._finish(node.id, "ok", evidence=[record.id for record in output.evidence])

    async def _derive(self, node: PlanNode) -> None:
        claims = [
            Claim(
                statement=text,
                type=ClaimType.ASSUMED,
                status=ClaimStatus.UNVALIDATED,
                reasoner="spec",
                reason="stated as an assumption in the spec",
            )
            for text in self.spec.assumptions
        ]
        request = ReasonerRequest(
            task=self.spec.task,
            min_supports=self.spec.reasoner.min_supports,
            evidence=tuple(self.evidence),
            outputs=dict(self.outcome.outputs),
            store=self.store,
            call_tool=lambda tool, arguments: self.tool_call(
                node.id, tool, arguments, finish=False
            ),
            mode=self.calls.mode,
        )
        failed_before = len(self.outcome.failures)
        try:
            claims += await self.reasoner.derive(request)
        except InputError as exc:
            self._fail(node.id, f"reasoner {self.reasoner.label}: {exc.message}")
            return
        except _BudgetStop as stop:
            self._fail(node.id, stop.message)
            raise
        for claim in claims:
            self._emit(ClaimEmitted, step=node.id, claim=claim)
        self.outcome.claims.extend(claims)
        self.outcome.outputs[node.id] = StepOutput(node.id, True)
        provider_failures = self.outcome.failures[failed_before:]
        if provider_failures:  # a failed call fails its step (failure-honesty)
            reason = provider_failures[0]["reason"]
            self._finish(node.id, "failed", claims=len(claims), reason=reason)
        else:
            self._finish(node.id, "ok", claims=len(claims))

    def _finalize(self) -> None:
        self._emit(StepStarted, step="finalize", kind="finalize")
        detail: dict[str, Any] = {
            "claims": len(self.outcome.claims),
            "tool_calls": self.tool_calls,
            "failures": len(self.outcome.failures),
        }
        if self.outcome.stopped:
            detail["reason"] = self.outcome.failures[-1]["reason"]
            self._finish("finalize", "failed", **detail)
        else:
            self._finish("finalize", "ok", **detail)
