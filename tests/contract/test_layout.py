"""The run directory's file names are named once, in ``contract/layout.py``."""

from __future__ import annotations

import re
from pathlib import Path

from toolproof.contract import layout
from toolproof.contract.evidence import evidence_path_for

SRC = Path(__file__).resolve().parents[2] / "src" / "toolproof"
NAMES = (
    "spec.json",
    "plan.json",
    "runtime.json",
    "trace.jsonl",
    "claims.json",
    "report.json",
    "timings.json",
    "manifest.json",
)


def test_the_layout_names_every_run_file() -> None:
    assert (
        layout.SPEC_FILE,
        layout.PLAN_FILE,
        layout.RUNTIME_FILE,
        layout.TRACE_FILE,
        layout.CLAIMS_FILE,
        layout.REPORT_FILE,
        layout.TIMINGS_FILE,
        layout.MANIFEST_FILE,
    ) == NAMES
    assert layout.EVIDENCE_DIR == "evidence"
    assert layout.evidence_path("ab" * 32) == "evidence/" + "ab" * 32
    assert evidence_path_for("evidence_" + "ab" * 32) == "evidence/" + "ab" * 32


def test_no_module_but_the_layout_spells_a_run_file_name_as_a_literal() -> None:
    names = "|".join(re.escape(name) for name in NAMES)
    # a whole string literal that is a file name, or a path join onto the evidence folder
    literal = re.compile(rf"""(?<![\w"'])["'](?:{names})["'](?![\w"'])|/ ["']evidence/?["']""")
    spelled = sorted(
        f"{path.relative_to(SRC).as_posix()}: {match.group(0)}"
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).as_posix() != "contract/layout.py"
        for match in literal.finditer(path.read_text(encoding="utf-8"))
    )
    assert spelled == []
