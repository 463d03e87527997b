"""Shared fixtures."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return ROOT


PLUGINS = ROOT / "tests" / "plugins"


@pytest.fixture(scope="session")
def install_plugin(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], None]:
    """pip-install ``tests/plugins/<name>`` (a copy: the source tree stays clean) into this venv."""

    def install(name: str) -> None:
        source = tmp_path_factory.mktemp("plugin") / name
        shutil.copytree(PLUGINS / name, source)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", str(source)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)
        assert done.returncode == 0, done.stderr
        importlib.invalidate_caches()

    return install
