"""The shared declared-tool binding conformance suite passes in full, through our adapters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT.parent / "shared" / "cases" / "binding"
HERE = Path(__file__).resolve().parent


def _suite() -> Path:
    if not (SUITE / "runner.py").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the binding conformance suite is missing at {SUITE} (CI must have it)")
        pytest.skip(f"the binding conformance suite is not beside the repository ({SUITE})")
    return SUITE


@pytest.mark.parametrize(
    "adapter",
    [
        "binding_adapter.py",  # bind_contribution, Tool.call
        "langchain_adapter.py",  # the same tool through as_structured_tool(...).ainvoke
    ],
)
def test_binding_suite_passes_in_full(adapter: str) -> None:
    suite = _suite()
    cases = json.loads((suite / "cases.json").read_text(encoding="utf-8"))["cases"]
    completed = subprocess.run(
        [sys.executable, str(suite / "runner.py"), str(HERE / adapter), "-q"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    assert lines, completed.stderr
    assert lines[-1] == f"{len(cases)} passed, 0 failed", completed.stdout
    assert completed.returncode == 0
