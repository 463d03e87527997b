"""Put the sample plugin package on the path on demand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parent.parent / "plugins" / "sample_reasoner"


@pytest.fixture(scope="module")
def sample_plugin(install_plugin: Callable[[str], None]) -> None:
    """tests/plugins/sample_reasoner, built into a temporary folder on the path (the module's)."""
    install_plugin("sample_reasoner")
