"""Make the shared run helpers (tests/runs/runs_support.py) importable."""

from __future__ import annotations

import sys
from pathlib import Path

_RUNS = str(Path(__file__).resolve().parent.parent / "runs")
if _RUNS not in sys.path:
    sys.path.insert(0, _RUNS)
