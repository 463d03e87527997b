"""Make the shared run helpers importable; install the sample plugin package on demand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

_RUNS = str(Path(__file__).resolve().parent.parent / "runs")
if _RUNS not in sys.path:
    sys.path.insert(0, _RUNS)

SAMPLE = Path(__file__).resolve().parent.parent / "plugins" / "sample_reasoner"


@pytest.fixture(scope="session")
def sample_plugin(install_plugin: Callable[[str], None]) -> None:
    """tests/plugins/sample_reasoner, pip-installed into this interpreter's environment."""
    install_plugin("sample_reasoner")
