"""Make the shared run helpers importable; install the sample plugin package on demand."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_RUNS = str(Path(__file__).resolve().parent.parent / "runs")
if _RUNS not in sys.path:
    sys.path.insert(0, _RUNS)

SAMPLE = Path(__file__).resolve().parent.parent / "plugins" / "sample_reasoner"


@pytest.fixture(scope="session")
def sample_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """pip-install tests/plugins/sample_reasoner (a copy) into this interpreter's environment."""
    source = tmp_path_factory.mktemp("plugin") / "sample_reasoner"
    shutil.copytree(SAMPLE, source)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr
    importlib.invalidate_caches()
    yield
