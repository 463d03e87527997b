"""The sample package's own conformance tests, as an author writes them with toolproof.testing.

Kept out of toolproof's collection (the file name does not start with ``test_``);
``tests/testing/test_sample_plugin.py`` runs it with pytester as ``test_conformance.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolproof import Tool, Toolset
from toolproof.testing import (
    ConformanceError,
    assert_call_fails,
    assert_call_ok,
    assert_check_conforms,
    assert_reasoner_conforms,
)

NOTES = {"pear": "Pears ripen on the sill.", "fig": "Figs came in on Tuesday."}


async def note(item: str) -> dict[str, str]:
    """The note kept about an item."""
    return {"item": item, "note": NOTES[item]}


def toolset() -> Toolset:
    tools = Toolset()
    tools.add(Tool.from_function(note))
    return tools.seal()


def spec(reasoner: str, item: str = "pear") -> dict[str, Any]:
    return {
        "task": "What do the notes say?",
        "steps": [{"id": "look", "tool": "note", "arguments": {"item": item}}],
        "reasoner": {"name": reasoner},
    }


def test_the_tool_succeeds_and_fails_as_typed_results() -> None:
    assert assert_call_ok(toolset()["note"], {"item": "fig"})["item"] == "fig"
    assert_call_fails(toolset()["note"], {"item": "kiwi"}, kind="tool_error")


def test_the_reasoner_conforms(tmp_path: Path) -> None:
    assert_reasoner_conforms(
        spec("sample-quotes"), toolset(), tmp_path, insufficient=spec("sample-quotes", "kiwi")
    )


def test_the_check_conforms(toolproof_run: Any) -> None:
    sound = toolproof_run(spec("sample-quotes"), toolset()).path
    paraphrase = {
        "claims": [{"statement": "Something about pears.", "cite": {"n": "steps.look.value.note"}}]
    }
    broken = toolproof_run(
        {**spec("tool-results"), "reasoner": {"name": "tool-results", "params": paraphrase}},
        toolset(),
    ).path
    assert_check_conforms("sample-statement-quotes", sound, broken)


def test_the_broken_variants_fail_naming_their_rule(tmp_path: Path, toolproof_run: Any) -> None:
    with pytest.raises(ConformanceError) as reasoner:
        assert_reasoner_conforms(spec("sample-quotes-broken"), toolset(), tmp_path)
    assert reasoner.value.rule == "INV-DERIVED-GROUNDED"
    sound = toolproof_run(spec("sample-quotes"), toolset()).path
    with pytest.raises(ConformanceError) as check:
        assert_check_conforms("sample-statement-quotes-broken", sound)
    assert check.value.rule == "kit:check-deterministic"
