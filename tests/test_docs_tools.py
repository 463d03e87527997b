"""The Python examples of docs/tools.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(
    r"^```python\n(.*?)^```", (ROOT / "docs" / "tools.md").read_text(encoding="utf-8"), re.M | re.S
)


def test_docs_have_examples() -> None:
    assert len(BLOCKS) == 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs_tools_{index}"}
    exec(compile(BLOCKS[index], f"docs/tools.md[{index}]", "exec"), namespace)
