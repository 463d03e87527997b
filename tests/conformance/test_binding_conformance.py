"""The declared-tool binding conformance suite passes in full, through our adapters.

The cases live in the repository (``tests/conformance/cases/binding.json``, copied from
``shared/cases/binding/``; see ``tests/conformance/README.md``) and run through the
project's own harness (``harness.py``), so the suite runs on any clone, never skips.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from harness import CASES, load_adapter, load_cases, run_case

ROOT = Path(__file__).resolve().parents[2]
SUITE = load_cases()
ADAPTERS = (
    "binding_adapter.py",  # bind_contribution, Tool.call
    "langchain_adapter.py",  # the same tool through as_structured_tool(...).ainvoke
)


def test_the_suite_is_the_recorded_copy_and_the_readme_counts_it() -> None:
    provenance = (ROOT / "tests" / "conformance" / "README.md").read_text(encoding="utf-8")
    digest = hashlib.sha256(CASES.read_bytes()).hexdigest()
    assert f"sha256 `{digest}`, {len(SUITE)} cases" in provenance
    assert len(SUITE) == 55
    assert len({case["id"] for case in SUITE}) == 55
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"(\d+)-case binding conformance suite", readme) == [str(len(SUITE))]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("case", SUITE, ids=[case["id"] for case in SUITE])
def test_binding_case_passes(adapter: str, case: dict[str, Any]) -> None:
    assert run_case(load_adapter(adapter), case) == []
