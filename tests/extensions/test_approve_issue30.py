"""The approval gate, third break-it pass (issue 30 items 5, 6, 7): each once got through."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from toolproof import ApprovalRequest, ApprovalStore, ConfigError, load_toolset
from toolproof.adapters.session_runs import record_session
from toolproof.contract.approval_rules import rule_from_record
from toolproof.identity import digest_json
from toolproof.verify.verifier import verify_run

HERE = Path(__file__).resolve().parent
GATED = "delete_branch_approve"


def write_config(tmp_path: Path, body: str) -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(body, encoding="utf-8")
    return config


def trace(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]


def test_the_body_runs_the_approved_bytes_not_the_callers_live_dict(tmp_path: Path) -> None:
    """Item 5: an approver that mutates the caller's dict before approving changes nothing."""
    config = write_config(
        tmp_path,
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{HERE}"\n\n'
        '[tools.delete_branch]\nextensions = [["approve"]]\n',
    )
    side = tmp_path / "side.txt"
    arguments: dict[str, Any] = {"path": str(side), "branch": "feature", "force": False}
    approved = dict(arguments)

    async def mutating_approver(request: ApprovalRequest) -> bool:
        arguments["branch"] = "main"  # the caller's own object, changed while deciding
        arguments["force"] = True
        return True

    async def main() -> tuple[Any, str]:
        async with record_session(
            config, root=tmp_path / "root", task="t", approver=mutating_approver
        ) as s:
            result = await s.toolset[GATED].call(arguments)
        assert s.run_id is not None
        return result, s.run_id

    result, run_id = asyncio.run(main())
    assert result.value == "deleted feature"
    assert side.read_text(encoding="utf-8") == "feature force=False\n"
    run = tmp_path / "root" / "runs" / run_id
    events = trace(run)
    (called,) = [e for e in events if e["type"] == "tool_called"]
    (requested,) = [e for e in events if e["type"] == "approval_requested"]
    assert called["call"]["arguments"] == approved
    assert requested["arguments_digest"] == digest_json(approved)
    assert verify_run(run).ok


def _purge_config(tmp_path: Path, rules: str, tool: str = "purge") -> Path:
    return write_config(
        tmp_path,
        f'[[python]]\nmodule = "approve_default_tools"\npath = "{HERE}"\n\n'
        f'[tools.{tool}]\nextensions = [["approve"]]\n\n{rules}',
    )


def test_a_rule_sees_nested_schema_defaults_the_body_runs_with(tmp_path: Path) -> None:
    """Item 6a: ``options: {}`` or no ``options`` is ``force = true`` to the body and the rule."""
    config = _purge_config(
        tmp_path, '[[approvals.rules]]\narguments = { "/options/force" = true }\n'
    )
    side = tmp_path / "side.txt"
    asked: list[dict[str, Any]] = []

    async def deny(request: ApprovalRequest) -> bool:
        asked.append(request.arguments)
        return False

    async def main() -> tuple[list[Any], str]:
        async with record_session(config, root=tmp_path / "root", task="t", approver=deny) as s:
            tool = s.toolset["purge_approve"]
            results = [
                await tool.call({"path": str(side), "options": {}}),
                await tool.call({"path": str(side)}),
                await tool.call({"path": str(side), "options": {"force": True}}),
                await tool.call({"path": str(side), "options": {"force": False}}),
            ]
        assert s.run_id is not None
        return results, s.run_id

    (empty, omitted, explicit, off), run_id = asyncio.run(main())
    assert [r.failure.kind for r in (empty, omitted, explicit)] == ["approval_denied"] * 3
    assert off.value == "purged"
    assert side.read_text(encoding="utf-8") == "force=False\n"  # only the ungated call ran
    assert asked == [
        {"path": str(side), "options": {}},
        {"path": str(side)},
        {"path": str(side), "options": {"force": True}},
    ]
    run = tmp_path / "root" / "runs" / run_id
    (skipped,) = [e for e in trace(run) if e["type"] == "approval_skipped"]
    assert skipped["rules"] == [
        {
            "index": 0,
            "when": {},
            "arguments": {"/options/force": True},
            "defaults": {"/options": {"force": True}, "/options/force": True},
        }
    ]
    assert verify_run(run).ok


def test_recorded_nested_defaults_rebuild_the_same_rule() -> None:
    rule = rule_from_record(
        {
            "index": 0,
            "arguments": {"/options/force": True},
            "defaults": {"/options": {}, "/options/force": True},
        }
    )
    assert rule.matches({"options": {}})
    assert rule.matches({})
    assert not rule.matches({"options": {"force": False}})
    assert not rule.matches({"options": None})
    legacy = rule_from_record(
        {"index": 0, "arguments": {"/force": True}, "defaults": {"force": True}}
    )
    assert legacy.matches({"path": "p"})


def test_a_global_rule_pointing_where_a_gated_tool_declares_nothing_is_refused(
    tmp_path: Path,
) -> None:
    """Item 6b: ``/force`` cannot gate ``purge`` (its force is ``/options/force``)."""
    config = _purge_config(tmp_path, '[[approvals.rules]]\narguments = { "/force" = true }\n')

    async def main() -> None:
        async with load_toolset(config):
            pass

    with pytest.raises(ConfigError) as refused:
        asyncio.run(main())
    assert refused.value.key == "approvals.rules[0]"
    assert refused.value.rule.startswith(
        "points at '/force', but tool 'purge' (gated by tools.purge.extensions) declares no "
        "'force' there in its input schema: the rule could never gate it"
    )
    nested = _purge_config(
        tmp_path, '[[approvals.rules]]\narguments = { "/options/forse" = true }\n'
    )
    with pytest.raises(ConfigError, match="declares no 'forse' there"):
        asyncio.run(main())
    assert nested.is_file()


@pytest.mark.parametrize(
    "section",
    [
        # a when the tool does not meet: the rule cannot gate it anyway
        '[[approvals.rules]]\nwhen = { readOnlyHint = true }\narguments = { "/force" = true }\n',
        # the rule points into the schema
        '[[approvals.rules]]\narguments = { "/options/force" = true }\n',
    ],
)
def test_rules_that_fit_the_gated_tool_load(tmp_path: Path, section: str) -> None:
    config = _purge_config(tmp_path, section)

    async def main() -> list[str]:
        async with load_toolset(config) as toolset:
            return toolset.names()

    assert "purge_approve" in asyncio.run(main())


def test_an_approve_element_with_its_own_policy_is_not_held_to_the_global_rules(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        f'[[python]]\nmodule = "approve_default_tools"\npath = "{HERE}"\n\n'
        '[tools.wipe]\nextensions = [["approve"]]\n\n'
        "[tools.purge]\nextensions = "
        '[[{name = "approve", config = {rules = [{arguments = {"/options/force" = true}}]}}]]\n\n'
        '[[approvals.rules]]\narguments = { "/force" = true }\n',
    )

    async def main() -> list[str]:
        async with load_toolset(config) as toolset:
            return toolset.names()

    assert {"purge_approve", "wipe_approve"} <= set(asyncio.run(main()))


def test_approve_outside_a_process_backend_is_decided_in_the_caller(tmp_path: Path) -> None:
    """Item 7: ``["approve", "process"]`` asks the session's approver; the worker never asks."""
    config = write_config(
        tmp_path,
        f'[[python]]\nmodule = "approve_worker_tools"\npath = "{HERE}"\n\n'
        '[tools.remove]\nextensions = [["approve", "process"]]\n\n'
        "[approvals]\ntimeout_seconds = 20\n",
    )
    side = tmp_path / "side.txt"
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments["branch"] == "feature"

    async def main() -> tuple[list[Any], str]:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            tool = s.toolset["remove_approve_process"]
            results = [
                await tool.call({"path": str(side), "branch": "feature"}),
                await tool.call({"path": str(side), "branch": "main"}),
            ]
        assert s.run_id is not None
        return results, s.run_id

    (approved, denied), run_id = asyncio.run(main())
    assert approved.ok, approved.failure
    assert approved.value != os.getpid()  # the body ran in a worker process
    assert side.read_text(encoding="utf-8") == f"feature pid={approved.value}\n"
    assert denied.failure.kind == "approval_denied"
    assert [(r.tool, r.arguments["branch"]) for r in asked] == [
        ("remove_approve", "feature"),
        ("remove_approve", "main"),
    ]
    rows = ApprovalStore(tmp_path / "approvals.sqlite").list(status=None)
    assert sorted((row.status, row.channel) for row in rows) == [
        ("consumed", "callback"),
        ("denied", "callback"),
    ]  # two requests, both the caller's: the worker asked for none
    run = tmp_path / "root" / "runs" / run_id
    kinds = [
        (e["type"], e.get("decision"))
        for e in trace(run)
        if e["type"] in ("approval_requested", "approval_decided", "tool_called")
    ]
    assert kinds == [
        ("approval_requested", None),
        ("approval_decided", "approve"),
        ("tool_called", None),
        ("approval_requested", None),
        ("approval_decided", "deny"),
        ("tool_called", None),
    ]
    assert verify_run(run).ok


def test_every_backend_ships_only_what_is_inside_the_deepest_gate(tmp_path: Path) -> None:
    """Item 7, any backend: the gate runs in the caller; what travels is the tool inside it."""
    from ext_support import elements

    from toolproof import Tool, Toolset
    from toolproof.backends import LocalBackend, backend
    from toolproof.extensions import ApplyContext, ExtensionRegistry, apply_combos

    registry = ExtensionRegistry()
    clients: list[LocalBackend] = []

    @backend(name="loop", registry=registry)
    def loop(config: Any, context: ApplyContext) -> LocalBackend:
        assert context.toolset is not None
        clients.append(LocalBackend(context.toolset))
        return clients[-1]

    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.tool)
        return True

    toolset = Toolset()
    toolset.add(Tool.from_function(add))
    context = ApplyContext(toolset=toolset, base_dir=tmp_path, approver=approver)
    combos = [
        elements("approve", "loop"),
        elements(("retry", {"force": True}), "approve", "loop"),
        elements("approve", ("retry", {"force": True}), "loop"),
    ]
    apply_combos(toolset, "add", combos, registry=registry, context=context)
    names = ["add_approve_loop", "add_retry_approve_loop", "add_approve_retry_loop"]
    stacks = [[layer.name for layer in toolset[name].stack] for name in names]
    assert stacks == [
        ["approve", "loop"],
        ["retry", "approve", "loop"],
        ["approve", "retry", "loop"],
    ]

    async def go() -> list[Any]:
        async with toolset.seal():
            return [(await toolset[name].call({"a": 1, "b": 2})).value for name in names]

    assert asyncio.run(go()) == [3, 3, 3]
    assert asked == ["add_approve", "add_retry_approve", "add_approve"]
    assert [request.variant for request in clients[0].sent] == ["add", "add_retry", "add"]
