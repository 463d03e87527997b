"""``read`` and ``prompt`` spec steps: a live run reads the Toolset's resources, replays frozen."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from toolproof import load_toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.contract.runs import RunSpec
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.verify.verifier import verify_run

NATIVE = Path(__file__).resolve().parents[1] / "fixtures" / "conformance" / "native.toml"
STEPS: list[dict[str, Any]] = [
    {"id": "text", "kind": "read", "params": {"uri": "test://template/7/data"}},
    {
        "id": "greet",
        "kind": "prompt",
        "params": {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
    },
]


def _run(tmp_path: Path, steps: list[dict[str, Any]]) -> Path:
    spec = RunSpec.model_validate({"task": "read", "steps": steps, "reasoner": {}})

    async def go() -> Path:
        async with load_toolset(NATIVE) as toolset:
            outcome = await execute_run(spec, root=tmp_path / "root", toolset=toolset)
            return outcome.path

    return asyncio.run(go())


def test_a_run_reads_a_resource_and_gets_a_prompt_as_evidence(tmp_path: Path) -> None:
    run = _run(tmp_path, STEPS)
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text("utf-8").splitlines()]
    kinds = [(e["type"], e["step"]) for e in events[:9]]
    assert kinds == [
        ("step_started", "text"),
        ("resource_read", "text"),
        ("evidence_registered", "text"),
        ("step_finished", "text"),
        ("step_started", "greet"),
        ("prompt_got", "greet"),
        ("evidence_registered", "greet"),
        ("step_finished", "greet"),
        ("step_started", "derive"),
    ]
    record = events[2]["evidence"]
    assert RunEvidence.open(run).read(record["id"]) == (
        b'{"id":"7","templateTest":true,"data":"Data for ID: 7"}'
    )
    assert (record["media_type"], record["source"]["kind"]) == ("application/json", "resource")
    assert events[3]["detail"] == {"evidence": [record["id"]]}
    assert verify_run(run).ok
    replayed = asyncio.run(replay_run(run))
    assert (replayed.identical, replayed.live_calls) == (True, 0)


def test_a_read_of_a_uri_nobody_lists_fails_its_step_naming_it(tmp_path: Path) -> None:
    run = _run(tmp_path, [{"id": "nope", "kind": "read", "params": {"uri": "test://nowhere"}}])
    events = [json.loads(line) for line in (run / "trace.jsonl").read_text("utf-8").splitlines()]
    [finished] = [e for e in events if e["type"] == "step_finished" and e["step"] == "nope"]
    assert (finished["status"], finished["detail"]) == (
        "failed",
        {"reason": "read step 'nope': no resource or template lists 'test://nowhere'"},
    )
