"""The Python blocks of docs/extensions.md run, in order, against a fresh registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import toolproof.extensions.registry as registry_module
from toolproof.extensions import ExtensionRegistry

DOC = Path(__file__).resolve().parents[2] / "docs" / "extensions.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ExtensionRegistry()
    monkeypatch.setattr(registry_module, "_DEFAULT", registry)
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 8
    for index, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name}[python block {index}]", "exec"), {"__name__": "docs"})
    assert {"upper", "tagged", "by_full_name", "passthrough"} <= set(registry.names())
