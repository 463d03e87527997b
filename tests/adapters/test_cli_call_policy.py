"""``toolproof call`` under a ``[policy]``: decided recorded or not, for ``--principal``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import Ran, toolproof

from toolproof import verify_run

TOOLS = '''\
import toolproof


@toolproof.tool(read_only=True)
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b
'''
POLICY = """@id("ops-small")
permit(principal == Agent::"ops", action, resource == Tool::"add")
when { context.arguments.a < 10 };
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "ops.cedar").write_text(POLICY, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(
        '[[python]]\nmodule = "calc"\n\n[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )
    return path


def _call(config: Path, *args: str) -> Ran:
    return toolproof("call", *args, "--config", str(config), cwd=config.parent)


def test_an_unrecorded_call_is_decided_for_its_principal(config: Path) -> None:
    denied = _call(config, "add", "--args", '{"a": 2}')
    assert denied.returncode == 1
    failure = json.loads(denied.stdout)
    assert (failure["kind"], failure["message"]) == (
        "denied_by_policy",
        "call to 'add' by Agent::default denied by policy: determining none (default 'deny')",
    )
    allowed = _call(config, "add", "--args", '{"a": 2}', "--principal", "Agent::ops")
    assert (allowed.returncode, allowed.stdout) == (0, "3\n")
    big = _call(config, "add", "--args", '{"a": 20}', "--principal", "Agent::ops")
    assert json.loads(big.stdout)["detail"]["principal"] == "Agent::ops"


def test_a_recorded_call_records_its_principal(config: Path) -> None:
    root = config.parent / "artifacts"
    done = _call(
        config, "add", "--args", '{"a": 2}', "--principal", "Agent::ops", "--record", str(root)
    )
    assert (done.returncode, done.stdout) == (0, "3\n")
    [run] = (root / "runs").iterdir()
    trace = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    decided = [e for e in trace if e["type"] == "policy_decided"]
    assert [(e["request"]["principal"], e["determining"]) for e in decided] == [
        ("Agent::ops", ["ops-small"])
    ]
    assert verify_run(run).ok


def test_a_principal_that_is_not_type_and_id_is_refused_before_loading(config: Path) -> None:
    done = _call(config, "add", "--args", '{"a": 2}', "--principal", "ops")
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        "principal 'ops': expected 'Type::id' (e.g. 'Agent::triage'; rule: a Cedar entity "
        "type, '::', then the id)"
    ) in " ".join(done.stderr.split())
