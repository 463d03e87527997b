"""The Python blocks of docs/backends.md run."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_python_blocks_run() -> None:
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    for index, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name}[python block {index}]", "exec"), {"__name__": "docs"})
