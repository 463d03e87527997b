"""The Python blocks of docs/declared-tools.md run, in order, as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "declared-tools.md"


def test_declared_tools_doc_examples_run_in_order() -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 4
    namespace: dict[str, Any] = {"__name__": "docs_declared_tools"}
    for index, block in enumerate(blocks):
        exec(compile(block, f"docs/declared-tools.md[{index}]", "exec"), namespace)
    assert namespace["roomy"].name == "weather"
