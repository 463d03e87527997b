"""Make the serve helpers (tests/adapters/serve_helpers.py) importable for the session tests."""

from __future__ import annotations

import sys
from pathlib import Path

_ADAPTERS = str(Path(__file__).resolve().parent.parent / "adapters")
if _ADAPTERS not in sys.path:
    sys.path.insert(0, _ADAPTERS)
