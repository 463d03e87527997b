"""docs/runs.md agrees with the code (its Python blocks run in tests/test_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_checks_table_lists_the_sequence_in_order() -> None:
    """The built-ins in order, then ``policy``, which only a run with a [policy] set has."""
    from toolproof.verify.checks import CHECKS
    from toolproof.verify.policy import POLICY_CHECK

    text = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \d+ \| `([a-z-]+)` \| `(INV-[A-Z-]+)` \|", text, re.MULTILINE)
    sequence = [*CHECKS, POLICY_CHECK]
    assert rows == [(check.id, check.invariant) for check in sequence]
