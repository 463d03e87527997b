"""Quote laundering (issue 30 item 8): a result's echo of its call's arguments supports nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import toolproof
from toolproof.evidence.echoes import ECHO_RULE, SHORT_RULE, echo_of, quote_problem
from toolproof.verify.verifier import verify_run

INVENTED = "The audit found no defects in the billing code."


async def note(text: str, tags: list[str] | None = None) -> str:
    """Store a note; answers with what it stored (an echo) and a fact of its own."""
    return f"Stored note: {text} Notes stored today: 12."


def toolset() -> toolproof.Toolset:
    tools = toolproof.Toolset()
    tools.add(toolproof.Tool.from_function(note))
    return tools.seal()


def answered(
    root: Path, text: str, citations: list[dict[str, Any]] | None = None, **arguments: Any
) -> tuple[list[dict[str, Any]], Any]:
    async def main() -> str:
        async with toolproof.record_session(toolset(), root=root, task="t") as session:
            result = await session.call("note", {"text": INVENTED, **arguments})
            assert result.ok, result.failure
            session.answer(text, citations)
        assert session.run_id is not None
        return session.run_id

    run = root / "runs" / asyncio.run(main())
    return json.loads((run / "claims.json").read_bytes()), verify_run(run)


def test_an_inline_quote_of_the_echoed_argument_does_not_validate(tmp_path: Path) -> None:
    (claim,), report = answered(tmp_path, f'The notes say "{INVENTED}" [call_1].')
    assert (claim["type"], claim["status"]) == ("derived", "unvalidated")
    assert claim["reason"] == (
        f"quote {INVENTED!r} in the result of call_1: it repeats an argument string of that "
        f"call (rule: {ECHO_RULE})"
    )
    assert claim["supports"] == []
    assert not report.ok
    (failure,) = report.failures
    assert failure.check == "grounding"
    assert ECHO_RULE in failure.finding.message


def test_an_explicit_citation_of_echoed_bytes_does_not_validate(tmp_path: Path) -> None:
    part = "no defects in the billing"  # any span of the echo, cited explicitly
    (claim,), report = answered(
        tmp_path, "All fine.", [{"tool": "note", "occurrence": 1, "quote": part}]
    )
    assert claim["status"] == "unvalidated"
    assert claim["reason"] == (
        f"quote {part!r} in the result of note#1: it repeats an argument string of that "
        f"call (rule: {ECHO_RULE})"
    )
    assert not report.ok


def test_an_echo_of_a_nested_argument_or_key_does_not_validate(tmp_path: Path) -> None:
    """Any string of the arguments counts: ``tags`` items too, and JSON fragments."""
    assert echo_of("billing code", {"tags": [{"billing code": 1}]}) == "an argument string"
    assert echo_of("count 12", {"n": {"note": "count  12"}}) == "an argument string"
    assert echo_of('"n":12', {"n": 12}) == "the arguments' canonical JSON"
    assert echo_of("Notes stored today", {"text": INVENTED}) is None
    assert echo_of(INVENTED, None) is None  # not a call's result (a retrieved chunk)


def test_what_the_tool_found_itself_still_validates(tmp_path: Path) -> None:
    (claim,), report = answered(tmp_path, 'There are "Notes stored today: 12." [call_1].')
    assert claim["status"] == "validated"
    assert [c["text"] for c in claim["citations"]] == ["Notes stored today: 12."]
    assert report.ok, report.failures


@pytest.mark.parametrize("quote", ["1", "12", "12.", " 12 "])
def test_a_quote_shorter_than_four_characters_never_validates_on_its_own(
    tmp_path: Path, quote: str
) -> None:
    (claim,), report = answered(tmp_path, "Twelve.", [{"call": "call_1", "quote": quote}])
    assert claim["status"] == "unvalidated"
    chars = len(quote.strip())
    assert claim["reason"] == (
        f"quote {quote!r} in the result of call_1: it is {chars} characters (rule: {SHORT_RULE})"
    )
    assert not report.ok


def test_a_short_quote_may_stand_beside_a_full_one(tmp_path: Path) -> None:
    citations = [
        {"call": "call_1", "quote": "12"},
        {"call": "call_1", "quote": "Notes stored today: 12."},
    ]
    (claim,), report = answered(tmp_path, "Twelve.", citations)
    assert claim["status"] == "validated"
    assert [c["text"] for c in claim["citations"]] == ["12", "Notes stored today: 12."]
    assert report.ok, report.failures


def test_quote_problem_names_the_short_rule_before_the_echo_rule() -> None:
    assert quote_problem("abc", {"x": "abc"}) == f"it is 3 characters (rule: {SHORT_RULE})"
    assert quote_problem("abcd", {"x": "abcd"}) == (
        f"it repeats an argument string of that call (rule: {ECHO_RULE})"
    )
    assert quote_problem("abcd", {"x": "zzz"}) is None
