"""Grounding beyond the quote (issue 32 point 4): the details of a cited sentence, by level."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

import toolproof
from toolproof.bundle.evidence import RunEvidence
from toolproof.config import load_config
from toolproof.errors import ConfigError, InputError
from toolproof.evidence.grounding import DETAIL_RULE, Grounding, sentence_spans, words_rule
from toolproof.verify.verifier import verify_run

CAPITAL = "Oslo has been the capital of Norway since 1814."
FACTS = {
    "capital": CAPITAL,
    "release": "Version 2.1 was released on 2024-03-01 to 1,200 users.",
    "growth": "Revenue grew 12 percent to $1,200 in the quarter.",
    "distance": "The trail is 5 km long and climbs 300 m.",
    "json": {"distance_km": 5, "price_usd": 1200},
}


async def read(name: str) -> Any:
    """Read a fact sheet."""
    return FACTS[name]


def _toolset() -> toolproof.Toolset:
    tools = toolproof.Toolset()
    tools.add(toolproof.Tool.from_function(read))
    return tools.seal()


def answered(
    root: Path,
    text: str,
    sheets: tuple[str, ...] = ("capital",),
    citations: list[dict[str, Any]] | None = None,
    **options: Any,
) -> tuple[dict[str, Any], Path]:
    """Record one session reading ``sheets`` and answering ``text``; its claim and run."""

    async def main() -> str:
        async with toolproof.record_session(_toolset(), root=root, task="t", **options) as session:
            for sheet in sheets:
                assert (await session.call("read", {"name": sheet})).ok
            session.answer(text, citations)
        assert session.run_id is not None
        return session.run_id

    run = root / "runs" / asyncio.run(main())
    (claim,) = json.loads((run / "claims.json").read_bytes())
    return claim, run


def _cited(claim: dict[str, Any], run: Path) -> list[str]:
    """The bytes each support of ``claim`` points at, decoded."""
    out = []
    for support in claim["supports"]:
        data = RunEvidence.open(run).read(support["evidence"])
        out.append(data[support["start"] : support["end"]].decode())
    return out


FALSE = 'Oslo has been the capital since 1299: "Oslo has been the capital" [call_1].'
"""The issue's case: a false fact next to a true quote."""


def test_the_issues_false_fact_beside_a_true_quote_is_unvalidated(tmp_path: Path) -> None:
    claim, run = answered(tmp_path, FALSE)
    assert (claim["type"], claim["status"]) == ("derived", "unvalidated")
    assert claim["reason"] == (
        f"detail '1299' (1299) of the sentence {FALSE!r} is not in the result of call_1 "
        f"(rule: {DETAIL_RULE})"
    )
    report = verify_run(run)
    assert [(f.check, f.finding.severity.value) for f in report.failures] == [
        ("grounding", "error")
    ]
    assert "detail '1299' (1299) of the sentence" in report.failures[0].finding.message


def test_at_level_quote_the_same_answer_validates_as_before(tmp_path: Path) -> None:
    claim, run = answered(tmp_path / "q", FALSE, grounding="quote")
    assert claim["status"] == "validated"
    assert _cited(claim, run) == ["Oslo has been the capital"]
    assert verify_run(run).ok


def test_a_three_byte_quote_supports_nothing_on_its_own(tmp_path: Path) -> None:
    text = 'It has been so "the" [call_1].'
    claim, _ = answered(tmp_path, text)
    assert claim["status"] == "unvalidated"
    assert claim["reason"] == (
        "quote 'the' in the result of call_1: it is 3 characters (rule: a quote shorter "
        "than 4 characters never validates on its own)"
    )
    two = 'Oslo is "the capital" [call_1].'
    claim, _ = answered(tmp_path / "two", two)
    assert claim["reason"] == (
        f"quote 'the capital' in the result of call_1: it is 2 words (rule: {words_rule(3)})"
    )
    claim, _ = answered(tmp_path / "one", two, min_quote_words=2)
    assert claim["status"] == "validated"
    claim, _ = answered(tmp_path / "quote", two, grounding="quote")
    assert claim["status"] == "validated"


def test_a_date_in_another_format_validates_with_its_span_as_a_support(tmp_path: Path) -> None:
    text = 'On 1 March 2024, "Version 2.1 was released" [call_1] to 1200 users.'
    claim, run = answered(tmp_path, text, ("release",))
    assert claim["status"] == "validated", claim["reason"]
    assert _cited(claim, run) == ["Version 2.1 was released", "2024-03-01", "1,200"]
    assert [c["text"] for c in claim["citations"]] == _cited(claim, run)
    assert verify_run(run).ok
    for form in ("March 1, 2024", "2024-03-01", "March 2024"):
        claim, _ = answered(tmp_path / form, text.replace("1 March 2024", form), ("release",))
        assert claim["status"] == "validated", (form, claim["reason"])
    claim, _ = answered(tmp_path / "wrong", text.replace("1 March", "2 March"), ("release",))
    assert claim["reason"].startswith("detail '2 March 2024' (2024-03-02) of the sentence")


@pytest.mark.parametrize(
    ("stated", "validated"),
    [
        ("12%", True),
        ("12 per cent", True),
        ("13%", False),
        ("$1,200", True),
        ("USD 1200", True),
        ("1,200 dollars", True),
        ("EUR 1,200", False),
    ],
)
def test_percentages_and_money(tmp_path: Path, stated: str, validated: bool) -> None:
    text = f'It came to {stated}: "Revenue grew 12 percent" [call_1].'
    claim, _ = answered(tmp_path, text, ("growth",))
    assert (claim["status"] == "validated") is validated, claim["reason"]


@pytest.mark.parametrize(
    ("stated", "validated"),
    [
        ("5 km", True),
        ("5 kilometres", True),
        ("5 miles", False),
        ("300 m", True),
        ("300 ft", False),
    ],
)
def test_units_must_agree(tmp_path: Path, stated: str, validated: bool) -> None:
    text = f'The trail is {stated}: "The trail is 5 km long" [call_1].'
    claim, _ = answered(tmp_path, text, ("distance",))
    assert (claim["status"] == "validated") is validated, claim["reason"]
    if not validated:
        assert f"detail {stated!r}" in claim["reason"]


def test_a_bare_number_in_json_supports_a_number_with_a_unit(tmp_path: Path) -> None:
    text = 'It is 5 km and costs $1,200 "The trail is 5 km long" [call_1] [call_2].'
    citations = [
        {"call": "call_1", "quote": "The trail is 5 km long"},
        {"call": "call_2", "quote": "price_usd"},
    ]
    claim, run = answered(tmp_path, text, ("distance", "json"), citations, min_quote_words=1)
    assert claim["status"] == "validated", claim["reason"]
    assert _cited(claim, run) == ["The trail is 5 km long", "price_usd", "5 km", "1200"]
    assert verify_run(run).ok


def test_explicit_citations_are_carried_by_every_sentence(tmp_path: Path) -> None:
    citations = [{"call": "call_1", "quote": "Oslo has been the capital"}]
    text = "Oslo is the capital. It has been since 1299."
    claim, _ = answered(tmp_path, text, citations=citations)
    assert claim["reason"] == (
        "detail '1299' (1299) of the sentence 'It has been since 1299.' is not in the "
        f"result of call_1 (rule: {DETAIL_RULE})"
    )


def test_a_sentence_without_a_citation_is_not_checked(tmp_path: Path) -> None:
    text = 'It was 1299 in Bergen. Later, "Oslo has been the capital" [call_1] since 1814.'
    claim, run = answered(tmp_path, text)
    assert claim["status"] == "validated", claim["reason"]
    assert _cited(claim, run) == ["Oslo has been the capital", "1814"]


def test_a_detail_may_be_in_any_result_its_sentence_cites(tmp_path: Path) -> None:
    text = (
        'Since 1814, "Oslo has been the capital" [call_1] and "Revenue grew 12 percent" '
        "[call_2] by 12%."
    )
    claim, run = answered(tmp_path, text, ("capital", "growth"))
    assert claim["status"] == "validated", claim["reason"]
    assert _cited(claim, run)[2:] == ["1814", "12 percent"]


def test_the_toml_sets_the_level(tmp_path: Path) -> None:
    (tmp_path / "facts.py").write_text(
        "import toolproof\n\n\n@toolproof.tool\ndef read(name: str) -> str:\n"
        f'    """Read a fact sheet."""\n    return {CAPITAL!r}\n',
        encoding="utf-8",
    )
    (tmp_path / "toolproof.toml").write_text(
        '[[python]]\nmodule = "facts"\n\n[grounding]\nlevel = "quote"\n', encoding="utf-8"
    )

    async def main() -> dict[str, Any]:
        config = tmp_path / "toolproof.toml"
        async with toolproof.record_session(config, root=tmp_path / "r", task="t") as session:
            await session.call("read", {"name": "capital"})
            session.answer(FALSE)
        run = tmp_path / "r" / "runs" / str(session.run_id)
        spec = json.loads((run / "spec.json").read_bytes())
        return dict(spec["reasoner"]["params"]["grounding"])

    assert asyncio.run(main()) == {"level": "quote", "min_quote_words": 3}


def test_bad_grounding_values_are_refused() -> None:
    with pytest.raises(
        InputError, match=r"grounding level 'strict': expected one of quote, details"
    ):
        Grounding(level="strict")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"min_quote_words 0: expected an integer from 1 to 100"):
        Grounding(min_quote_words=0)
    with pytest.raises(InputError, match=r"expected an object with level and min_quote_words"):
        Grounding.from_params({"level": "details", "strict": True})
    assert Grounding.from_params(None) == Grounding(level="quote")


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? four", ["One. ", "Two! ", "Three? four"]),
        ("See e.g. Dr. Smith at 3.5 km. Then go.", ["See e.g. Dr. Smith at 3.5 km. ", "Then go."]),
        (
            'It says "Created by Ada. Then" [call_1]. Next.',
            ['It says "Created by Ada. Then" [call_1]. ', "Next."],
        ),
        ("Intro\n\n- first 5\n- second 6", ["Intro\n\n", "- first 5\n", "- second 6"]),
        ("J. R. R. Tolkien wrote it.", ["J. R. R. Tolkien wrote it."]),
    ],
)
def test_sentences(text: str, sentences: list[str]) -> None:
    protected = [(text.find('"'), text.find("]") + 1)] if "[call_1]" in text else []
    assert [text[a:b] for a, b in sentence_spans(text, protected)] == sentences


def test_a_false_fact_beside_a_one_word_quote(tmp_path: Path) -> None:
    """What validated before grounding levels: a 4-byte quote and an invented year."""
    text = 'Oslo has been the capital since 1299 "Oslo" [call_1].'
    claim, _ = answered(tmp_path / "quote", text, grounding="quote")
    assert claim["status"] == "validated"
    claim, run = answered(tmp_path / "details", text)
    assert claim["status"] == "unvalidated"
    assert claim["reason"] == (
        f"quote 'Oslo' in the result of call_1: it is 1 word (rule: {words_rule(3)}); "
        f"detail '1299' (1299) of the sentence {text!r} is not in the result of call_1 "
        f"(rule: {DETAIL_RULE})"
    )
    assert not verify_run(run).ok


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('level = "strict"', "grounding.level: Input should be 'quote' or 'details'"),
        ("min_quote_word = 2", "did you mean 'min_quote_words'?"),
        ("min_quote_words = 0", "grounding.min_quote_words: Input should be greater than or"),
    ],
)
def test_the_toml_grounding_table_is_checked(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "toolproof.toml").write_text(f"[grounding]\n{toml}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(tmp_path / "toolproof.toml")


def test_a_citation_standing_alone_cites_the_sentence_before_it(tmp_path: Path) -> None:
    text = 'Oslo became the capital in 1299. "Oslo has been the capital" [call_1].'
    claim, _ = answered(tmp_path, text)
    assert claim["reason"] == (
        f"detail '1299' (1299) of the sentence {text!r} is not in the result of call_1 "
        f"(rule: {DETAIL_RULE})"
    )
