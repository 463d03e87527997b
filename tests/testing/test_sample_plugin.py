"""The sample plugin package (tests/plugins/sample_reasoner), pip-installed, against the kit."""

from __future__ import annotations

import asyncio
import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from runs_support import Counter, base_spec, make_toolset, run

from toolproof.contract.runs import ExecutionRuntime, RunSpec, Severity
from toolproof.errors import InputError, ReplayRefused
from toolproof.runs.registries import RunRegistries
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.testing import (
    ConformanceError,
    assert_check_conforms,
    assert_reasoner_conforms,
    assert_run_conforms,
)
from toolproof.verify.base import Check
from toolproof.verify.checks import CHECK_SEQUENCE
from toolproof.verify.sequence import CheckRegistry, register_check
from toolproof.verify.verifier import verify_run

pytestmark = pytest.mark.usefixtures("sample_plugin")
pytest_plugins = ["pytester"]


def _spec(reasoner: str = "sample-quotes", **extra: Any) -> dict[str, Any]:
    spec = base_spec(reasoner={"name": reasoner})
    spec.update(extra)
    return spec


def _insufficient(reasoner: str = "sample-quotes") -> dict[str, Any]:
    return _spec(reasoner, steps=[{"id": "kiwis", "tool": "stock", "arguments": {"item": "kiwi"}}])


def test_the_entry_points_are_declared() -> None:
    reasoners = {
        ep.name: ep.value for ep in importlib.metadata.entry_points(group="toolproof.reasoners")
    }
    checks = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="toolproof.checks")}
    assert reasoners["sample-quotes"] == "toolproof_sample_reasoner.reasoner:QuoteReasoner"
    assert checks["sample-statement-quotes"] == "toolproof_sample_reasoner.check:statement_quotes"


def test_the_sample_reasoner_passes_the_kit(tmp_path: Path) -> None:
    outcome = assert_reasoner_conforms(
        _spec(), make_toolset(Counter()), tmp_path, insufficient=_insufficient()
    )
    statements = [claim.statement for claim in outcome.outcome.claims]
    assert statements == [
        "step apples says: apple",
        "step fruit says something",
        "step plums says: plum",
    ]


def test_the_broken_reasoner_fails_the_kit_naming_the_rule(tmp_path: Path) -> None:
    with pytest.raises(ConformanceError) as caught:
        assert_reasoner_conforms(_spec("sample-quotes-broken"), make_toolset(Counter()), tmp_path)
    assert caught.value.rule == "INV-DERIVED-GROUNDED"
    assert str(caught.value).startswith("[INV-DERIVED-GROUNDED] [grounding] claims.json: claim ")
    assert "('step apples says: APPLE'): citation of support #0 does not match the cited bytes" in (
        str(caught.value)
    )


def _paraphrasing() -> dict[str, Any]:
    """tool-results citing the count but stating it in words: the sample check's fault."""
    claims = [{"statement": "There are a dozen apples.", "cite": {"n": "steps.apples.value.count"}}]
    return base_spec(reasoner={"name": "tool-results", "params": {"claims": claims}})


def _sound_and_broken(tmp_path: Path) -> tuple[Path, Path]:
    sound = run(tmp_path / "a", _spec(), make_toolset(Counter())).path
    broken = run(tmp_path / "b", _paraphrasing(), make_toolset(Counter())).path
    return sound, broken


def test_the_sample_check_passes_the_kit(tmp_path: Path) -> None:
    sound, broken = _sound_and_broken(tmp_path)
    assert_check_conforms("sample-statement-quotes", sound, broken)


def test_the_broken_check_fails_the_kit_naming_the_rule(tmp_path: Path) -> None:
    sound, broken = _sound_and_broken(tmp_path)
    with pytest.raises(ConformanceError) as caught:
        assert_check_conforms("sample-statement-quotes-broken", sound, broken)
    assert str(caught.value) == (
        "[kit:check-deterministic] check 'sample-statement-quotes-broken' found different "
        "things in two runs over the same directory"
    )


def test_a_spec_check_runs_after_the_built_ins_and_enters_the_identity(tmp_path: Path) -> None:
    plain = run(tmp_path / "plain", _spec(), make_toolset(Counter()))
    checked = run(
        tmp_path / "checked",
        _spec(checks=[{"name": "sample-statement-quotes"}]),
        make_toolset(Counter()),
    )
    assert checked.report.sequence == [*CHECK_SEQUENCE, "sample-statement-quotes"]
    assert plain.report.sequence == list(CHECK_SEQUENCE)
    runtime = ExecutionRuntime.model_validate_json((checked.path / "runtime.json").read_bytes())
    [descriptor] = runtime.checks
    assert (descriptor.kind, descriptor.name, descriptor.version, descriptor.origin) == (
        "check",
        "sample-statement-quotes",
        "1",
        "toolproof-sample-reasoner:toolproof_sample_reasoner.check:statement_quotes",
    )
    assert checked.report.outcome == "passed"
    assert verify_run(checked.path).ok
    assert_run_conforms(checked.path)
    assert plain.run_id != checked.run_id


def test_a_check_finding_fails_the_run_and_verification(tmp_path: Path) -> None:
    spec = _paraphrasing()
    spec["checks"] = [{"name": "sample-statement-quotes"}]
    outcome = run(tmp_path, spec, make_toolset(Counter()))
    [(result, finding)] = outcome.report.failing()
    assert (result.check, result.invariant, finding.message) == (
        "sample-statement-quotes",
        "INV-SAMPLE-QUOTES",
        "claim 0 does not quote its citation '12'; put the cited text in the statement",
    )
    assert [failure.check for failure in verify_run(outcome.path).failures] == [
        "sample-statement-quotes"
    ]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"reasoner": {"name": "sample-missing"}},
            "reasoner plugin 'sample-missing' (toolproof-sample-reasoner:"
            "toolproof_sample_reasoner.missing:Reasoner) cannot be used: loading entry point "
            "'toolproof_sample_reasoner.missing:Reasoner' raised ModuleNotFoundError: No module "
            "named 'toolproof_sample_reasoner.missing'",
        ),
        (
            {"reasoner": {"name": "sample-not-a-reasoner"}},
            "reasoner plugin 'sample-not-a-reasoner' (toolproof-sample-reasoner:"
            "toolproof_sample_reasoner.broken:not_a_reasoner) cannot be used: the entry point is "
            "<function not_a_reasoner",
        ),
        (
            {"checks": [{"name": "sample-missing"}]},
            "check plugin 'sample-missing' (toolproof-sample-reasoner:"
            "toolproof_sample_reasoner.missing:check) cannot be used: loading entry point",
        ),
        (
            {"checks": [{"name": "sample-statement-quotes", "params": {"x": 1}}]},
            "check plugin 'sample-statement-quotes' (toolproof-sample-reasoner:"
            "toolproof_sample_reasoner.check:statement_quotes) cannot be used: it takes no params",
        ),
        (
            {"checks": [{"name": "nope"}]},
            "unknown check 'nope': no registered check and no 'toolproof.checks' entry point",
        ),
    ],
)
def test_a_broken_or_unknown_plugin_refuses_the_run(
    tmp_path: Path, section: dict[str, Any], message: str
) -> None:
    spec = RunSpec.model_validate(base_spec(**section))
    with pytest.raises(InputError) as caught:
        asyncio.run(execute_run(spec, root=tmp_path, toolset=make_toolset(Counter())))
    assert caught.value.message.startswith(message)
    runs = tmp_path / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []


def _registered_check(version: str) -> Check:
    return Check(
        id="test-registered",
        invariant="INV-TEST",
        severity=Severity.ERROR,
        summary="finds nothing",
        run=lambda view: [],
        version=version,
    )


def test_a_check_that_changed_or_is_gone_is_named_by_verify_and_replay(tmp_path: Path) -> None:
    first = RunRegistries(checks=CheckRegistry())
    register_check(_registered_check("1"), registry=first.checks)
    outcome = run(
        tmp_path,
        base_spec(checks=[{"name": "test-registered"}]),
        make_toolset(Counter()),
        registries=first,
    )
    assert verify_run(outcome.path, checks=first.checks).ok
    second = RunRegistries(checks=CheckRegistry())
    register_check(_registered_check("2"), registry=second.checks)
    [failure] = verify_run(outcome.path, checks=second.checks).failures
    assert str(failure) == (
        "[checks] runtime.json: the additional checks are not the ones the run recorded "
        "(recorded test-registered/1; installed now test-registered/2); verify with the "
        "recorded versions, or re-run"
    )
    with pytest.raises(ReplayRefused, match="the checks changed: recorded test-registered/1, now"):
        asyncio.run(replay_run(outcome.path, registries=second))
    failure, report = verify_run(outcome.path).failures  # a new registry: not registered
    assert report.check == "report"  # the report was made by a longer sequence
    assert str(failure).startswith(
        "[checks] spec.json: unknown check 'test-registered': no registered check"
    )
    assert str(failure).endswith("install it to verify this run")


def test_the_packages_own_conformance_tests_pass(pytester: pytest.Pytester) -> None:
    source = Path(__file__).resolve().parents[1] / "plugins" / "sample_reasoner" / "conformance"
    pytester.makepyfile(
        test_conformance=(source / "conformance_tests.py").read_text(encoding="utf-8")
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
