"""The extension seams and the conformance kit as an author types them; mypy --strict in CI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolproof import Toolset
from toolproof.contract import Claim
from toolproof.plugins import (
    Check,
    Finding,
    Reasoner,
    ReasonerRequest,
    RuntimePlugin,
    Severity,
    register_check,
    register_reasoner,
)
from toolproof.runs.calls import CallPort, LiveCalls
from toolproof.testing import Cassette, ConformanceError, assert_check_conforms
from toolproof.verify.view import RunView


@register_reasoner
class Nothing(Reasoner):
    name = "typed-nothing"
    deterministic = False
    varies = ("model",)

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        result, record = await request.call_tool("model", {"prompt": request.task})
        ok: bool = result.ok and record is not None
        self.last_ok = ok
        return []


def no_findings(view: RunView) -> list[Finding] | None:
    return [] if view.claims is not None else None


CHECK = Check("typed-check", "INV-TYPED", Severity.ERROR, "finds nothing", no_findings, "2")
register_check(CHECK)


class Local(RuntimePlugin):
    kind = "local"
    name = "typed-local"

    def configuration(self) -> dict[str, Any]:
        return {"region": "here"}

    def calls(self, toolset: Toolset) -> CallPort:
        return LiveCalls(toolset)


def conform(sound: Path, broken: Path, run_dir: Path) -> str:
    try:
        assert_check_conforms({"name": "typed-check"}, sound, broken)
    except ConformanceError as exc:
        return exc.rule
    cassette = Cassette(run_dir)
    cassette.override("stock", {"item": "kiwi"}, {"count": 0})
    toolset: Toolset = cassette.toolset()
    return ",".join(toolset.names())
