"""The Python examples of docs/extending.md that define a reasoner and a check run as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from runs_support import Counter, base_spec, make_toolset, run

from toolproof.plugins import register_check, register_reasoner
from toolproof.runs.registries import RunRegistries
from toolproof.testing import ConformanceError, assert_check_conforms, assert_run_conforms

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(
    r"^```python\n(.*?)^```",
    (ROOT / "docs" / "extending.md").read_text(encoding="utf-8"),
    re.M | re.S,
)


def _exec(index: int) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_extending_{index}"}
    exec(compile(BLOCKS[index], f"docs/extending.md[{index}]", "exec"), namespace)
    return namespace


def test_the_documented_reasoner_and_check_work(tmp_path: Path) -> None:
    assert len(BLOCKS) == 6  # the reasoner, the check, the kit, three cassette blocks
    registries = RunRegistries()
    register_reasoner(_exec(0)["QuoteReasoner"], registry=registries.reasoners)
    register_check(_exec(1)["statement_quotes"], registry=registries.checks)
    spec = base_spec(
        steps=[{"id": "report", "tool": "text", "arguments": {"topic": "plums"}}],
        reasoner={"name": "doc-quotes"},
        checks=[{"name": "doc-statement-quotes"}],
    )
    outcome = run(tmp_path, spec, make_toolset(Counter()), registries=registries)
    assert [claim.statement for claim in outcome.outcome.claims] == [
        "step report says: Report on plums. The plums shelf is full. Nothing else to add."
    ]
    assert outcome.report.sequence[-1] == "doc-statement-quotes"
    assert_run_conforms(outcome.path, registries=registries)
    # registered in this registry only: the kit, which checks identity across
    # processes, builds checks from installed entry points
    with pytest.raises(ConformanceError, match=r"^\[kit:check-builds\] unknown check"):
        assert_check_conforms("doc-statement-quotes", outcome.path)
