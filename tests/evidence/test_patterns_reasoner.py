import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolproof.contract.evidence import ClaimStatus, EvidenceRecord
from toolproof.contract.runs import ReasonerSpec
from toolproof.errors import InputError
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.evidence.reasoners import ReasonerRequest, StepOutput
from toolproof.evidence.store import EvidenceStore

TEXT = "commit abc123\nAuthor: Ada <ada@example.org>\n\n    Add the engine\n"


def derive(tmp_path: Path, params: dict[str, Any], *, min_supports: int = 1, text: str = TEXT):
    store = EvidenceStore(tmp_path)
    record = EvidenceRecord.model_validate(
        store.put(
            text.encode("utf-8"),
            media_type="text/plain; charset=utf-8",
            kind="tool_result",
            step="show",
        )
    )
    spec = ReasonerSpec(name="patterns", min_supports=min_supports, params=params)
    reasoner = reasoner_registry().create(spec)
    request = ReasonerRequest(
        task="t",
        min_supports=min_supports,
        evidence=(record,),
        outputs={"show": StepOutput("show", True, text, (record,))},
        store=store,
    )
    return asyncio.run(reasoner.derive(request)), store


def test_each_placeholder_is_a_byte_span_in_statement_order(tmp_path: Path) -> None:
    params = {
        "claims": [
            {
                "statement": "{who} wrote {commit}",
                "step": "show",
                "patterns": {"commit": r"^commit (\w+)$", "who": r"^Author: ([^<]+?) <"},
            }
        ]
    }
    (claim,), store = derive(tmp_path, params, min_supports=2)
    assert (claim.statement, claim.status) == ("Ada wrote abc123", ClaimStatus.VALIDATED)
    assert [(s.start, s.end) for s in claim.supports] == [(22, 25), (7, 13)]
    data = store.read(claim.supports[0].evidence)
    assert [data[s.start : s.end] for s in claim.supports] == [b"Ada", b"abc123"]
    assert [c.text for c in claim.citations] == ["Ada", "abc123"]


def test_a_pattern_that_finds_nothing_is_insufficient_evidence(tmp_path: Path) -> None:
    params = {"claims": [{"statement": "{x}", "step": "show", "patterns": {"x": r"^Date: (.+)$"}}]}
    (claim,), _ = derive(tmp_path, params)
    assert claim.status == ClaimStatus.INSUFFICIENT_EVIDENCE
    assert claim.reason == "pattern 'x' found nothing in step 'show'"
    assert claim.supports == []


def test_fewer_supports_than_min_supports_is_insufficient(tmp_path: Path) -> None:
    params = {"claims": [{"statement": "{x}", "step": "show", "patterns": {"x": r"(Ada)"}}]}
    (claim,), _ = derive(tmp_path, params, min_supports=2)
    assert claim.reason == "1 supports, fewer than min_supports = 2"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"claims": [{"statement": "{x}", "step": "s", "patterns": {}}]},
            "placeholder {x} has no entry in 'patterns'",
        ),
        (
            {"claims": [{"statement": "{x}", "step": "s", "patterns": {"x": "("}}]},
            "pattern 'x' does not compile",
        ),
        (
            {"claims": [{"statement": "{x}", "step": "s", "patterns": {"x": "abc"}}]},
            "pattern 'x' has no capturing group",
        ),
        (
            {"claims": [{"statement": "{x}", "step": "s", "patterns": {"x": "(a)" * 200}}]},
            "pattern 'x' is longer than 500 characters",
        ),
        (
            {"claims": [{"statement": "x", "step": "s", "patterns": {}, "extra": 1}]},
            "claims.0.extra: Extra inputs are not permitted",
        ),
    ],
)
def test_bad_params_are_refused_naming_the_rule(params: dict[str, Any], message: str) -> None:
    with pytest.raises(
        InputError, match=message.replace("{", r"\{").replace("}", r"\}").replace("(", r"\(")
    ):
        reasoner_registry().create(ReasonerSpec(name="patterns", params=params))
