"""The Python blocks of docs/runs.md run as written (from the repository root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_python_blocks_of_runs_doc_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    blocks = BLOCK.findall((ROOT / "docs" / "runs.md").read_text(encoding="utf-8"))
    assert len(blocks) == 1
    for index, code in enumerate(blocks):
        exec(compile(code, f"runs.md[python block {index}]", "exec"), {"__name__": "docs"})


def test_checks_table_lists_the_sequence_in_order() -> None:
    from toolproof.verify.checks import CHECKS

    text = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \d+ \| `([a-z-]+)` \| `(INV-[A-Z-]+)` \|", text, re.MULTILINE)
    assert rows == [(check.id, check.invariant) for check in CHECKS]
