"""The non-extension boundaries of seed 002, each tried by a misbehaving plugin and caught."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError
from runs_support import Counter, base_spec, make_toolset, run

from toolproof import Tool, Toolset
from toolproof.contract import Claim
from toolproof.contract.evidence import Citation, ClaimStatus, ClaimType
from toolproof.contract.runs import ExecutionRuntime, ReasonerSpec, RunSpec
from toolproof.contract.tools import ToolResult
from toolproof.contract.trace import ClaimEmitted, TraceEvent
from toolproof.errors import InputError, ReplayRefused, ToolCallError
from toolproof.evidence.reasoners import ReasonerRequest, register_reasoner
from toolproof.plugins import Reasoner
from toolproof.runs.registries import RunRegistries
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.testing import ConformanceError, assert_frozen_replay, assert_run_conforms
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import RunView

REGISTRIES = RunRegistries()
"""The test reasoners of this file are registered here, and every run below uses it."""


def _spec(reasoner: str, **extra: Any) -> dict[str, Any]:
    return base_spec(reasoner={"name": reasoner, **extra})


def _failing(report: Any) -> list[tuple[str, str]]:
    return [(result.check, finding.message) for result, finding in report.failing()]


# -- canonical models are frozen; a claim mutated after emission is detected -------------


def test_a_claim_cannot_be_mutated_after_its_identity_is_set() -> None:
    claim = Claim(statement="x", type=ClaimType.ASSUMED, status=ClaimStatus.UNVALIDATED)
    with pytest.raises(ValidationError, match="frozen"):
        claim.statement = "y"  # type: ignore[misc]


def test_no_canonical_model_of_a_run_can_be_mutated(tmp_path: Path) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()), registries=REGISTRIES)
    view = RunView(outcome.path)
    assert view.spec and view.plan and view.runtime and view.events and view.claims
    models = [view.spec, view.plan, view.runtime, view.events[3], view.claims[0], outcome.report]
    for model in models:
        field = next(iter(type(model).model_fields))
        with pytest.raises(ValidationError, match="Instance is frozen"):
            setattr(model, field, None)


def test_a_claim_mutated_by_a_progress_plugin_does_not_reach_the_run(tmp_path: Path) -> None:
    """The plugin sees an event validated from the line's JSON: a copy, not the run's claim."""

    def tamper(event: TraceEvent) -> None:  # a progress plugin that edits what it sees
        if isinstance(event, ClaimEmitted):
            object.__setattr__(event.claim, "statement", "There are 99 apples.")

    spec = RunSpec.model_validate(base_spec())
    outcome = asyncio.run(
        execute_run(spec, root=tmp_path, toolset=make_toolset(Counter()), on_event=tamper)
    )
    assert _failing(outcome.report) == []
    assert outcome.report.outcome == "passed"


# -- assumed/observed never becomes validated-derived without supports and checks -------


@register_reasoner(registry=REGISTRIES.reasoners)
class PromotingReasoner(Reasoner):
    """Misbehaves: declares an observation validated, with no supports."""

    name = "test-promoting"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        return [
            Claim(
                statement="Apples are popular.",
                type=ClaimType.OBSERVED,
                status=ClaimStatus.VALIDATED,
                reasoner=self.label,
            )
        ]


def test_an_observed_claim_promoted_to_validated_fails_grounding(tmp_path: Path) -> None:
    outcome = run(tmp_path, _spec("test-promoting"), make_toolset(Counter()), registries=REGISTRIES)
    assert outcome.report.outcome == "failed"
    assert {check for check, _ in _failing(outcome.report)} == {"grounding"}
    with pytest.raises(ConformanceError, match=r"^\[INV-DERIVED-GROUNDED\] \[grounding\]"):
        assert_run_conforms(outcome.path, registries=REGISTRIES)


# -- a tool failure turned into plausible text is detected ------------------------------


def _swallowing_toolset(counter: Counter) -> Toolset:
    base = make_toolset(counter)
    inner = base["stock"]

    async def body(arguments: dict[str, Any]) -> Any:
        result = await inner.call(arguments)
        if result.failure is not None:  # misbehaves: a plausible answer instead of the failure
            return {"item": arguments["item"], "count": 0, "shelf": "A1", "note": "none left"}
        return result.value

    toolset = Toolset()
    toolset.add(Tool(inner.spec, body, source="test:swallowing"))
    return toolset.seal()


def _retrying_toolset() -> Toolset:
    attempts = Counter()

    async def flaky(item: str) -> Any:
        attempts.calls += 1
        if attempts.calls == 1:
            failure = ToolResult.fail("unavailable", "try again", retryable=True, where="body")
            assert failure.failure is not None
            raise ToolCallError(failure.failure)
        return {"item": item, "count": 3}

    inner = Tool.from_function(flaky, description="Flaky stock.")

    async def body(arguments: dict[str, Any]) -> Any:
        result = await inner.call(arguments)
        while result.failure is not None and result.failure.retryable:
            result = await inner.call(arguments)
        return result

    toolset = Toolset()
    toolset.add(Tool(inner.spec.model_copy(update={"name": "stock"}), body, source="test:retry"))
    return toolset.seal()


def test_a_wrapper_that_turns_a_failure_into_a_value_is_caught(tmp_path: Path) -> None:
    spec = base_spec(steps=[{"id": "apples", "tool": "stock", "arguments": {"item": "kiwi"}}])
    spec["reasoner"] = {"name": "tool-results"}
    outcome = run(tmp_path, spec, _swallowing_toolset(Counter()), registries=REGISTRIES)
    [(check, message)] = _failing(outcome.report)
    assert check == "failure-honesty"
    assert "returned a value although a layer reported tool_error: tool 'stock' raised " in message
    assert verify_run(outcome.path).failures[0].check == "failure-honesty"


def test_a_retryable_failure_recovered_is_not_flagged(tmp_path: Path) -> None:
    spec = base_spec(steps=[{"id": "apples", "tool": "stock", "arguments": {"item": "kiwi"}}])
    spec["reasoner"] = {"name": "tool-results"}
    outcome = run(tmp_path, spec, _retrying_toolset(), registries=REGISTRIES)
    assert outcome.report.outcome == "passed"
    assert b'"type":"failure_observed"' in (outcome.path / "trace.jsonl").read_bytes()
    assert_frozen_replay(
        outcome.path, registries=REGISTRIES
    )  # observed failures replay identically


def test_the_builtin_retry_wrapper_declares_its_recovery(tmp_path: Path) -> None:
    from toolproof.extensions import ComboElement, build_combo
    from toolproof.tools.function import ToolOptions

    attempts = Counter()

    async def stock(item: str) -> dict[str, Any]:
        attempts.calls += 1
        if attempts.calls == 1:
            raise RuntimeError("flaky")
        return {"item": item, "count": 3}

    base = Tool.from_function(stock, description="Stock.", options=ToolOptions(read_only=True))
    [*_, (_, variant)] = build_combo(base, (ComboElement("retry", {"backoff": 0}),))
    toolset = Toolset()
    toolset.add(variant)
    step = {"id": "apples", "tool": variant.name, "arguments": {"item": "apple"}}
    spec = base_spec(steps=[step])
    spec["reasoner"] = {"name": "tool-results"}
    outcome = run(tmp_path, spec, toolset.seal(), registries=REGISTRIES)
    assert outcome.report.outcome == "passed"
    trace = (outcome.path / "trace.jsonl").read_bytes()
    assert b'"recovered_by":"retry"' in trace and b"raised RuntimeError: flaky" in trace


# -- evidence outside the artifact root is refused --------------------------------------


@register_reasoner(registry=REGISTRIES.reasoners)
class EscapingReasoner(Reasoner):
    """Misbehaves: reads evidence by a path outside the run."""

    name = "test-escaping"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        request.store.read("../../../etc/passwd")
        return []


@register_reasoner(registry=REGISTRIES.reasoners)
class SymlinkingReasoner(Reasoner):
    """Misbehaves: swaps the evidence pack for a symlink to identical bytes outside the run."""

    name = "test-symlinking"
    outside: ClassVar[Path]

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        path = request.store.pack.path
        self.outside.write_bytes(path.read_bytes())
        path.unlink()
        os.symlink(self.outside, path)
        return []


def test_evidence_outside_the_run_is_refused(tmp_path: Path) -> None:
    outcome = run(
        tmp_path / "a", _spec("test-escaping"), make_toolset(Counter()), registries=REGISTRIES
    )
    [(check, message)] = _failing(outcome.report)
    assert (check, message) == ("required-steps", message)
    assert "no evidence ../../../etc/passwd in this run" in message
    SymlinkingReasoner.outside = tmp_path / "outside.json"
    with pytest.raises(InputError, match=r"^run directory holds non-regular files: evidence\.pack"):
        run(
            tmp_path / "b", _spec("test-symlinking"), make_toolset(Counter()), registries=REGISTRIES
        )
    assert list((tmp_path / "b").iterdir()) == []  # nothing committed, no temp left


# -- evidence re-encoded after its spans were recorded fails its digest ------------------


@register_reasoner(registry=REGISTRIES.reasoners)
class ReencodingReasoner(Reasoner):
    """Misbehaves: cites a value, then rewrites the evidence in the run's pack."""

    name = "test-reencoding"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        record = request.evidence[0]
        support = request.store.support(record.id, 0, 5)
        text = request.store.read(record.id)[0:5].decode()
        path = request.store.pack.path
        path.write_bytes(path.read_bytes().replace(b",", b";"))
        return [
            Claim(
                statement=f"It starts with {text}",
                type=ClaimType.DERIVED,
                status=ClaimStatus.VALIDATED,
                supports=[support],
                citations=[Citation(support=0, text=text)],
                reasoner=self.label,
            )
        ]


def test_reencoded_evidence_fails_its_digest(tmp_path: Path) -> None:
    outcome = run(
        tmp_path, _spec("test-reencoding"), make_toolset(Counter()), registries=REGISTRIES
    )
    [(check, message)] = _failing(outcome.report)  # the run's own report sees it
    assert check == "evidence-digests"
    assert re.fullmatch(
        r"evidence\.pack at byte 26: item 1's bytes do not hash to its digest [0-9a-f]{64}",
        message,
    )
    [failure] = verify_run(outcome.path).failures
    assert failure.check == "evidence-digests"
    with pytest.raises(ConformanceError, match=r"^\[INV-EVIDENCE-DIGEST\] \[evidence-digests\]"):
        assert_run_conforms(outcome.path, registries=REGISTRIES)


# -- a changed provider or runtime configuration changes the fingerprint ----------------


class VersionedReasoner(Reasoner):
    """A reasoner whose version a release bumps."""

    name = "test-versioned"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        return []


def test_changed_reasoner_version_or_params_changes_the_runtime_id() -> None:
    register_reasoner(VersionedReasoner, registry=REGISTRIES.reasoners)
    toolset = make_toolset(Counter()).descriptor()

    def runtime_id(**changes: Any) -> str:
        reasoner = REGISTRIES.reasoners.create(ReasonerSpec(name="test-versioned", **changes))
        return ExecutionRuntime(toolset=toolset, reasoner=reasoner.descriptor()).id

    before = runtime_id()
    assert runtime_id(min_supports=2) != before
    VersionedReasoner.version = "2"
    try:
        assert runtime_id() != before
    finally:
        VersionedReasoner.version = "1"
    assert runtime_id() == before


def test_a_changed_reasoner_refuses_frozen_replay(tmp_path: Path) -> None:
    register_reasoner(VersionedReasoner, registry=REGISTRIES.reasoners)
    outcome = run(tmp_path, _spec("test-versioned"), make_toolset(Counter()), registries=REGISTRIES)
    VersionedReasoner.version = "2"
    try:
        with pytest.raises(ReplayRefused, match="the reasoner changed: recorded test-versioned/1"):
            asyncio.run(replay_run(outcome.path, registries=REGISTRIES))
    finally:
        VersionedReasoner.version = "1"


# -- frozen replay never calls a live provider ------------------------------------------


def _model_toolset(counter: Counter) -> Toolset:
    toolset = make_toolset(counter)
    tools = Toolset()
    for name in toolset.names():
        tools.add(toolset[name])

    async def model(prompt: str) -> str:
        counter.calls += 1
        return f"The model read {len(prompt)} characters at {time.time_ns()}."

    from toolproof.tools.function import ToolOptions

    options = ToolOptions(deterministic=False, varies=("model",))
    tools.add(Tool.from_function(model, description="A model.", options=options))
    return tools.seal()


@register_reasoner(registry=REGISTRIES.reasoners)
class ModelReasoner(Reasoner):
    """Calls a model through the run's provider port; swallows every error (misbehaves)."""

    name = "test-model"
    deterministic = False
    varies = ("model",)
    prompt: ClassVar[str] = "Summarize the stock."

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        try:
            _result, record = await request.call_tool("model", {"prompt": self.prompt})
        except Exception:  # a reasoner that hides the refusal from the replay
            return []
        assert record is not None
        text = request.store.read(record.id).decode()
        return [
            Claim(
                statement=text,
                type=ClaimType.DERIVED,
                status=ClaimStatus.VALIDATED,
                supports=[request.store.support(record.id, 0, len(text.encode()))],
                citations=[Citation(support=0, text=text)],
                reasoner=self.label,
            )
        ]


def test_frozen_replay_serves_the_recorded_provider_response(tmp_path: Path) -> None:
    counter = Counter()
    outcome = run(tmp_path, _spec("test-model"), _model_toolset(counter), registries=REGISTRIES)
    assert outcome.report.outcome == "passed"
    assert counter.calls == 4  # three steps and the model
    result = assert_frozen_replay(outcome.path, registries=REGISTRIES)
    assert (result.live_calls, counter.calls) == (0, 4)
    runtime = ExecutionRuntime.model_validate_json((outcome.path / "runtime.json").read_bytes())
    assert (runtime.reasoner.deterministic, runtime.reasoner.varies) == (False, ["model"])


def test_a_reasoner_that_swallows_the_refusal_cannot_hide_it(tmp_path: Path) -> None:
    outcome = run(tmp_path, _spec("test-model"), _model_toolset(Counter()), registries=REGISTRIES)
    ModelReasoner.prompt = "Another prompt."
    try:
        with pytest.raises(ReplayRefused, match="step 'derive' calls 'model' with changed"):
            asyncio.run(replay_run(outcome.path, registries=REGISTRIES))
    finally:
        ModelReasoner.prompt = "Summarize the stock."


@register_reasoner(registry=REGISTRIES.reasoners)
class ClockReadingReasoner(Reasoner):
    """Misbehaves: reads a live provider (the clock) directly instead of a recorded call."""

    name = "test-clock-reading"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        return [
            Claim(
                statement=f"Checked at {time.time_ns()}.",
                type=ClaimType.ASSUMED,
                status=ClaimStatus.UNVALIDATED,
                reasoner=self.label,
            )
        ]


def test_a_reasoner_reading_a_live_provider_fails_frozen_replay(tmp_path: Path) -> None:
    outcome = run(
        tmp_path, _spec("test-clock-reading"), make_toolset(Counter()), registries=REGISTRIES
    )
    with pytest.raises(ConformanceError, match=r"^\[kit:frozen-replay\] the replay differs"):
        assert_frozen_replay(outcome.path, registries=REGISTRIES)


def test_unknown_reasoner_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown reasoner 'nope'"):
        run(tmp_path, _spec("nope"), make_toolset(Counter()), registries=REGISTRIES)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
