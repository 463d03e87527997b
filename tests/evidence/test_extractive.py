import pytest

from toolproof.evidence.extractive import EvidenceText, answer_question, split_sentences

TEXT = (
    'The "finally" clause\n'
    "====================\n"
    "\n"
    'If "finally" is present, it specifies a cleanup handler.  The "try"\n'
    "clause is executed first.\n"
    "\n"
    "   >>> try:\n"
    "   ...     pass\n"
    "\n"
    'stmt ::= "try" suite\n'
    "\n"
    "Caf\u00e9 owners say the finally clause always runs at the end.\n"
).encode("utf-8")


def test_sentences_carry_exact_byte_spans_and_skip_non_prose() -> None:
    sentences = split_sentences(EvidenceText("ev_1", TEXT))
    assert [s.text for s in sentences] == [
        'If "finally" is present, it specifies a cleanup handler.',
        'The "try" clause is executed first.',
        "Café owners say the finally clause always runs at the end.",
    ]
    for sentence in sentences:
        raw = TEXT[sentence.start : sentence.end].decode("utf-8")
        assert " ".join(raw.split()) == sentence.text


def test_answer_cites_the_best_sentences_with_min_supports() -> None:
    answer = answer_question(
        "When does the finally clause run?", [EvidenceText("ev_1", TEXT)], min_supports=1
    )
    assert answer is not None
    assert answer.statement == "Café owners say the finally clause always runs at the end."
    (support,) = answer.supports
    assert (
        TEXT[support.start : support.end]
        == "Café owners say the finally clause always runs at the end.".encode()
    )
    assert answer.confidence == 1.0


def test_too_few_qualifying_sentences_is_insufficient_evidence() -> None:
    assert (
        answer_question(
            "When does the finally clause run?", [EvidenceText("e", TEXT)], min_supports=3
        )
        is None
    )


def test_a_question_whose_words_are_absent_is_not_answered() -> None:
    assert (
        answer_question("What is the airspeed of an unladen swallow?", [EvidenceText("e", TEXT)])
        is None
    )
    assert answer_question("what is it", [EvidenceText("e", TEXT)]) is None


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="min_supports must be >= 1, got 0"):
        answer_question("q", [], min_supports=0)
    with pytest.raises(ValueError, match=r"min_coverage must be in \(0, 1\], got 1.5"):
        answer_question("q", [], min_coverage=1.5)
