"""The Python blocks of docs/serve.md run as written (from the repository root)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_doc_has_python_blocks() -> None:
    assert len(BLOCKS) == 1


@pytest.mark.parametrize("block", BLOCKS)
def test_a_python_block_runs(block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DOC.parent.parent)
    exec(compile(block, str(DOC), "exec"), {"__name__": "serve_docs"})
