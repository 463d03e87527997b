"""The kit's tool assertions: successful/failed calls and descriptor stability."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolproof.testing import (
    ConformanceError,
    assert_call_fails,
    assert_call_ok,
    assert_identity_stable,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit_fixtures import kit_tools


def test_a_good_tool_passes() -> None:
    tool = kit_tools.good()
    assert assert_call_ok(tool, {"item": "apple"}) == "A1"
    failed = assert_call_fails(tool, {"item": "kiwi"}, kind="tool_error")
    assert failed.failure is not None
    assert_call_fails(tool, {"item": 3}, kind="invalid_arguments")


def test_a_tool_turning_failure_into_text_fails_the_kit() -> None:
    with pytest.raises(ConformanceError) as caught:
        assert_call_fails(kit_tools.swallowing(), {"item": "kiwi"})
    assert str(caught.value) == (
        "[kit:failed-call] tool 'polite' with {'item': 'kiwi'} returned a value "
        "('on the usual shelf') where it must report a failure; never turn a failure into "
        "plausible output"
    )


def test_a_wrong_failure_kind_fails_the_kit() -> None:
    with pytest.raises(ConformanceError, match=r"^\[kit:failed-call\] tool 'shelf': failure kind"):
        assert_call_fails(kit_tools.good(), {"item": "kiwi"}, kind="timeout")


def test_descriptor_stability_across_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    here = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", here)
    digest = assert_identity_stable({"tool": "kit_fixtures.kit_tools:good"})
    assert digest.startswith("sha256:")
    rules = set()
    for seed in (1, 2, 3, 4):  # set order differs for some seed
        try:
            assert_identity_stable({"tool": "kit_fixtures.kit_tools:unstable"}, hash_seed=seed)
        except ConformanceError as exc:
            rules.add(exc.rule)
            assert "in a process with PYTHONHASHSEED=" in exc.message
    assert rules == {"kit:descriptor-stable"}
