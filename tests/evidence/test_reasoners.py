from __future__ import annotations

import pytest

from toolproof.contract.runs import ReasonerSpec
from toolproof.errors import InputError
from toolproof.evidence.reasoners import reasoner_for, registered_reasoners


def test_tool_results_is_registered_and_described() -> None:
    assert "tool-results" in registered_reasoners()
    reasoner = reasoner_for(ReasonerSpec())
    descriptor = reasoner.descriptor()
    assert (descriptor.name, descriptor.version) == ("tool-results", "1")
    other = reasoner_for(ReasonerSpec(min_supports=2)).descriptor()
    assert other.config_digest != descriptor.config_digest


def test_unknown_reasoner_lists_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown reasoner 'oracle' \(known: .*tool-results"):
        reasoner_for(ReasonerSpec(name="oracle"))


def test_unknown_param_is_refused() -> None:
    with pytest.raises(InputError) as info:
        reasoner_for(ReasonerSpec(params={"claim": []}))
    assert info.value.message == (
        "reasoner 'tool-results' params: claim: Extra inputs are not permitted"
    )


def test_uncited_placeholder_is_refused() -> None:
    params = {"claims": [{"statement": "{a} and {b}", "cite": {"a": "steps.x.value"}}]}
    with pytest.raises(InputError, match=r"claims\[0\]: placeholder \{b\} has no entry in 'cite'"):
        reasoner_for(ReasonerSpec(params=params))


def test_too_few_supports_is_insufficient_evidence(tmp_path: object) -> None:
    import asyncio
    from pathlib import Path

    from runs_support import Counter, base_spec, make_toolset, run

    spec = base_spec()
    spec["reasoner"]["min_supports"] = 2
    outcome = run(Path(str(tmp_path)), spec, make_toolset(Counter()))
    statuses = [(c.status.value, c.reason) for c in outcome.outcome.claims]
    assert statuses == [
        ("validated", ""),
        ("insufficient_evidence", "1 supports, fewer than min_supports = 2"),
    ]
    assert asyncio.iscoroutinefunction(reasoner_for(ReasonerSpec()).derive)
