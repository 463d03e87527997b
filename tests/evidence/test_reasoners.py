from __future__ import annotations

import pytest

from toolproof.contract.evidence import Claim
from toolproof.contract.runs import ReasonerSpec
from toolproof.errors import InputError
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.evidence.reasoners import Reasoner, ReasonerRequest, register_reasoner


def test_tool_results_is_registered_and_described() -> None:
    builtins = ["answer", "extractive", "llm", "patterns", "tool-results"]
    assert reasoner_registry().names() == builtins
    reasoner = reasoner_registry().create(ReasonerSpec())
    descriptor = reasoner.descriptor()
    assert (descriptor.name, descriptor.version) == ("tool-results", "1")
    other = reasoner_registry().create(ReasonerSpec(min_supports=2)).descriptor()
    assert other.config_digest != descriptor.config_digest


def test_unknown_reasoner_lists_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown reasoner 'oracle' \(known: .*tool-results"):
        reasoner_registry().create(ReasonerSpec(name="oracle"))


def test_unknown_param_is_refused() -> None:
    with pytest.raises(InputError) as info:
        reasoner_registry().create(ReasonerSpec(params={"claim": []}))
    assert info.value.message == (
        "reasoner 'tool-results' params: claim: Extra inputs are not permitted"
    )


def test_uncited_placeholder_is_refused() -> None:
    params = {"claims": [{"statement": "{a} and {b}", "cite": {"a": "steps.x.value"}}]}
    with pytest.raises(InputError, match=r"claims\[0\]: placeholder \{b\} has no entry in 'cite'"):
        reasoner_registry().create(ReasonerSpec(params=params))


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
    assert asyncio.iscoroutinefunction(reasoner_registry().create(ReasonerSpec()).derive)


class _Named(Reasoner):
    name = "test-named"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        return []


def test_register_reasoner_declares_and_registers_only_into_a_given_registry() -> None:
    assert register_reasoner(_Named) is _Named  # a declaration: nothing registered anywhere
    with pytest.raises(InputError, match="unknown reasoner 'test-named'"):
        reasoner_registry().create(ReasonerSpec(name="test-named"))
    registry = reasoner_registry()
    assert register_reasoner(registry=registry)(_Named) is _Named
    assert registry.create(ReasonerSpec(name="test-named")).label == "test-named/1"
    assert "test-named" not in reasoner_registry().names()  # each registry is its own


def test_a_name_is_registered_once_per_registry() -> None:
    class Other(_Named):
        pass

    registry = reasoner_registry()
    registry.add(_Named)
    registry.add(_Named)  # the same class again: a no-op
    with pytest.raises(InputError) as info:
        registry.add(Other)
    assert info.value.message == "reasoner name 'test-named' is already registered"
    assert info.value.fields == {"plugin": "test-named", "kind": "reasoner", "rule": "unique"}


def test_register_reasoner_refuses_what_is_not_a_named_reasoner() -> None:
    class Unnamed(Reasoner):
        async def derive(self, request: ReasonerRequest) -> list[Claim]:
            return []

    with pytest.raises(InputError, match=r"^register_reasoner: Unnamed sets no name$"):
        register_reasoner(Unnamed)
    with pytest.raises(InputError, match="is not a Reasoner subclass"):
        register_reasoner(dict)  # type: ignore[arg-type]
