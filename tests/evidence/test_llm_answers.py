"""Reading a model's reply tolerantly, and the prompt it was given."""

from __future__ import annotations

import pytest

from toolproof.evidence.llm_answers import (
    ParsedAnswer,
    ParsedQuote,
    answer_schema,
    parse_answer,
    user_prompt,
)


def test_a_plain_json_reply() -> None:
    parsed = parse_answer('{"answer": "Yes.", "quotes": [{"evidence": "E1", "text": "a b"}]}')
    assert parsed == ParsedAnswer("Yes.", (ParsedQuote("E1", "a b"),))


def test_a_fenced_reply_with_prose_and_synonyms() -> None:
    text = (
        "Sure! Here is the JSON:\n```json\n"
        '{"answer": "It binds names.", "quotes": [{"source": "[e2]", "quote": "binds"},'
        ' {"id": 3, "text": "x"}, {"evidence": "E1", "text": "  "}, "junk"]}\n```\nHope it helps.'
    )
    assert parse_answer(text) == ParsedAnswer(
        "It binds names.", (ParsedQuote("E2", "binds"), ParsedQuote("E3", "x"))
    )


def test_a_label_that_is_no_label_is_kept_as_said() -> None:
    parsed = parse_answer('{"answer": "a", "quotes": [{"evidence": "the docs", "text": "t"}]}')
    assert parsed is not None and parsed.quotes == (ParsedQuote("the docs", "t"),)


@pytest.mark.parametrize(
    "answer",
    ["null", '""', '"  "', '"I don\'t know."', '"I do not know"', '"Unknown"', '"N/A"'],
)
def test_no_answer_is_none(answer: str) -> None:
    parsed = parse_answer(f'{{"answer": {answer}, "quotes": []}}')
    assert parsed == ParsedAnswer(None, ())


@pytest.mark.parametrize(
    "text", ["", "The answer is yes.", '{"result": 1}', "[1, 2]", '{"answer": "a"', "{{{"]
)
def test_a_reply_without_the_object_is_malformed(text: str) -> None:
    assert parse_answer(text) is None


def test_the_first_object_with_the_keys_wins() -> None:
    text = '{"note": 1} then {"answer": "first", "quotes": []} and {"answer": "second"}'
    assert parse_answer(text) == ParsedAnswer("first", ())


def test_the_prompt_labels_the_evidence_in_order() -> None:
    prompt = user_prompt("Why?", ["alpha text", "beta text"], 2)
    assert prompt.endswith("Question: Why?\nEvidence:\n[E1]\nalpha text\n\n[E2]\nbeta text\nReply:")
    assert "1 to 2 quotes" in prompt
    assert answer_schema(2)["properties"]["quotes"]["maxItems"] == 2


def test_an_answer_that_only_starts_like_no_answer_is_an_answer() -> None:
    parsed = parse_answer('{"answer": "None of the names are rebound.", "quotes": []}')
    assert parsed == ParsedAnswer("None of the names are rebound.", ())
