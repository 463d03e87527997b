"""The ``approve`` wrapper: a person decides, bound to the exact call, fail closed (issue 16)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolproof import ApprovalRequest, ApprovalStore, ConfigError, Decision, load_toolset
from toolproof.adapters.session_runs import record_session
from toolproof.identity import digest_json
from toolproof.verify.verifier import verify_run

HERE = Path(__file__).resolve().parent
GATED = "delete_branch_approve"


def write_config(tmp_path: Path, approvals: str = "", extensions: str = '[["approve"]]') -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f"""
[[python]]
module = "approve_fixture_tools"
path = "{HERE}"

[tools.delete_branch]
extensions = {extensions}

{approvals}
""",
        encoding="utf-8",
    )
    return config


def trace(run: Path) -> list[dict[str, Any]]:
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines]


def approval_events(run: Path) -> list[dict[str, Any]]:
    return [
        e for e in trace(run) if e["type"].startswith("approval_") or e["type"] == "tool_called"
    ]


class Asked:
    """An approver callback that records what it was asked and answers ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        return self.answer


def test_an_approved_call_runs_and_its_decision_is_bound_in_the_trace(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"
    approver = Asked(True)

    async def main() -> str:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            result = await s.toolset[GATED].call({"path": str(side), "branch": "b1"})
            assert result.ok, result.failure
        assert s.run_id is not None
        return s.run_id

    run_id = asyncio.run(main())
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"
    (request,) = approver.requests
    assert request.tool == GATED
    assert request.arguments == {"path": str(side), "branch": "b1"}
    assert request.rule is None
    run = tmp_path / "root" / "runs" / run_id
    requested, decided, called = approval_events(run)
    assert requested["type"] == "approval_requested"
    assert requested["call_id"] == called["call_id"] == request.call_id
    assert requested["arguments_digest"] == request.arguments_digest
    assert requested["request"] == request.request_id
    assert decided["decision"] == "approve"
    assert decided["channel"] == "callback"
    assert decided["who"] == "test_approve.Asked"
    assert decided["approved_digest"] == request.arguments_digest
    assert verify_run(run).ok
    row = ApprovalStore(tmp_path / "approvals.sqlite").require(request.request_id)
    assert (row.status, row.decision, row.call_id) == ("consumed", "approve", request.call_id)


def test_a_denied_call_never_runs_its_body(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"

    async def main() -> Any:
        approver = Asked(Decision(False, reason="not on a Friday"))
        async with load_toolset(config, approver=approver) as toolset:
            return await toolset[GATED].call({"path": str(side), "branch": "b1"})

    result = asyncio.run(main())
    assert not side.exists()
    assert result.failure.kind == "approval_denied"
    assert result.failure.detail["reason"] == "not on a Friday"
    assert result.failure.detail["who"] == "test_approve.Asked"


def test_approve_with_edits_runs_the_edited_arguments_only(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"
    edited = {"path": str(side), "branch": "b1-safe"}
    approver = Asked(Decision(True, arguments=edited, reason="renamed"))

    async def main() -> str:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            result = await s.toolset[GATED].call({"path": str(side), "branch": "b1", "force": True})
            assert result.value == "deleted b1-safe"
        assert s.run_id is not None
        return s.run_id

    run = tmp_path / "root" / "runs" / asyncio.run(main())
    assert side.read_text(encoding="utf-8") == "b1-safe force=False\n"
    _, decided, _ = approval_events(run)
    assert decided["decision"] == "approve_with_edits"
    assert decided["edited_arguments"] == edited
    assert decided["reason"] == "renamed"
    assert verify_run(run).ok


def test_an_edit_that_fails_the_schema_denies_the_call(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"
    approver = Asked(Decision(True, arguments={"path": str(side), "branch": 7}))

    async def main() -> Any:
        async with load_toolset(config, approver=approver) as toolset:
            return await toolset[GATED].call({"path": str(side), "branch": "b1"})

    result = asyncio.run(main())
    assert not side.exists()
    assert result.failure.kind == "approval_denied"
    assert result.failure.detail["reason"].startswith(
        "the edited arguments fail the input schema: invalid arguments for tool 'delete_branch'"
    )


def test_no_decision_within_the_timeout_is_a_denial(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[approvals]\ntimeout_seconds = 0.2\n")
    side = tmp_path / "side.txt"

    async def main() -> Any:
        async with load_toolset(config) as toolset:
            return await toolset[GATED].call({"path": str(side), "branch": "b1"})

    result = asyncio.run(main())
    assert not side.exists()
    assert result.failure.kind == "approval_denied"
    assert result.failure.detail["reason"] == "no decision within 0.2 s (timeout)"
    (row,) = ApprovalStore(tmp_path / "approvals.sqlite").list(status=None)
    assert (row.status, row.who, row.channel) == ("denied", "toolproof", "fail-closed")


def test_a_slow_approver_times_out_and_an_approver_that_raises_denies(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[approvals]\ntimeout_seconds = 0.2\n")
    side = tmp_path / "side.txt"

    async def slow(request: ApprovalRequest) -> bool:
        await asyncio.sleep(30)
        return True

    async def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("approver down")

    async def main() -> list[Any]:
        out = []
        for approver in (slow, broken):
            async with load_toolset(config, approver=approver) as toolset:
                out.append(await toolset[GATED].call({"path": str(side), "branch": "b1"}))
        return out

    timed_out, raised = asyncio.run(main())
    assert not side.exists()
    assert timed_out.failure.detail["reason"] == "no decision within 0.2 s (timeout)"
    assert raised.failure.detail["reason"] == (
        "the approver test_approve.test_a_slow_approver_times_out_and_an_approver_that_raises_"
        "denies.<locals>.broken raised: RuntimeError: approver down"
    )


def test_an_unreachable_store_is_a_denial(tmp_path: Path) -> None:
    (tmp_path / "store-is-a-dir").mkdir()
    config = write_config(tmp_path, '[approvals]\nstore = "store-is-a-dir"\n')
    side = tmp_path / "side.txt"
    approver = Asked(True)

    async def main() -> Any:
        async with load_toolset(config, approver=approver) as toolset:
            return await toolset[GATED].call({"path": str(side), "branch": "b1"})

    result = asyncio.run(main())
    assert not side.exists()
    assert approver.requests == []
    assert result.failure.kind == "approval_denied"
    assert result.failure.detail["who"] == "toolproof"
    assert result.failure.detail["reason"].startswith(
        f"the approvals store {tmp_path / 'store-is-a-dir'} cannot be used: OperationalError"
    )


def test_rules_gate_only_the_calls_they_match(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        '[[approvals.rules]]\nwhen = { destructiveHint = true }\narguments = { "/force" = true }\n',
    )
    side = tmp_path / "side.txt"
    approver = Asked(False)

    async def main() -> list[Any]:
        async with load_toolset(config, approver=approver) as toolset:
            tool = toolset[GATED]
            return [
                await tool.call({"path": str(side), "branch": "soft"}),
                await tool.call({"path": str(side), "branch": "hard", "force": True}),
                await tool.call({"path": str(side), "branch": "one", "force": 1}),
            ]

    soft, hard, _ = asyncio.run(main())
    assert soft.ok and hard.failure.kind == "approval_denied"
    assert side.read_text(encoding="utf-8") == "soft force=False\n"
    (request,) = approver.requests  # force=1 fails the schema before any rule
    assert request.rule == {
        "index": 0,
        "when": {"destructiveHint": True},
        "arguments": {"/force": True},
    }


def test_a_rule_whose_when_never_holds_leaves_the_tool_ungated(tmp_path: Path) -> None:
    config = write_config(tmp_path, "[[approvals.rules]]\nwhen = { readOnlyHint = true }\n")
    side = tmp_path / "side.txt"

    async def main() -> Any:
        async with load_toolset(config) as toolset:
            return await toolset[GATED].call({"path": str(side), "branch": "b1"})

    assert asyncio.run(main()).ok
    assert not (tmp_path / "approvals.sqlite").exists()


def test_defer_returns_a_handle_and_the_retry_runs_once_after_approval(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[approvals]\nmode = "defer"\n')
    side = tmp_path / "side.txt"
    store = ApprovalStore(tmp_path / "approvals.sqlite")
    arguments = {"path": str(side), "branch": "b1"}

    async def main() -> list[Any]:
        async with load_toolset(config) as toolset:
            tool = toolset[GATED]
            pending = await tool.call(arguments)
            handle = pending.failure.detail["handle"]
            again = await tool.call({**arguments, "approval_handle": handle})
            row = store.require(handle)
            store.decide(
                handle,
                approve=True,
                who="alice",
                channel="cli",
                approved_digest=row.arguments_digest,
            )
            other = await tool.call({**arguments, "branch": "b2", "approval_handle": handle})
            ran = await tool.call({**arguments, "approval_handle": handle})
            twice = await tool.call({**arguments, "approval_handle": handle})
            return [pending, again, other, ran, twice]

    pending, again, other, ran, twice = asyncio.run(main())
    assert pending.failure.kind == "approval_pending" and pending.failure.retryable
    assert again.failure.kind == "approval_pending"
    handle = pending.failure.detail["handle"]
    assert other.failure.kind == "approval_denied"
    assert other.failure.detail["reason"] == (
        f"handle {handle}: it was requested for another tool, descriptor or arguments; "
        "it approves nothing"
    )
    assert ran.value == "deleted b1"
    assert twice.failure.detail["reason"] == "this request's approval was already used"
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"


def test_a_denied_session_call_verifies_and_records_the_denial(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"

    async def main() -> str:
        approver = Asked(False)
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            result = await s.toolset[GATED].call({"path": str(side), "branch": "b1"})
            assert result.failure.kind == "approval_denied"
        assert s.run_id is not None
        return s.run_id

    run = tmp_path / "root" / "runs" / asyncio.run(main())
    assert not side.exists()
    _, decided, _ = approval_events(run)
    assert (decided["decision"], decided["approved_digest"]) == ("deny", None)
    assert verify_run(run).ok


@pytest.mark.parametrize(
    ("approvals", "key", "rule"),
    [
        ("[approvals]\nstroe = 'x'\n", "approvals.stroe", "unknown key"),
        ("[approvals]\nmode = 'later'\n", "approvals.mode", "Input should be 'wait' or 'defer'"),
        (
            "[approvals]\ntimeout_seconds = 0\n",
            "approvals.timeout_seconds",
            "0.0 is not a duration",
        ),
        (
            "[[approvals.rules]]\nwhen = { dangerous = true }\n",
            "approvals.rules[0].when",
            "'dangerous' is not an MCP tool annotation",
        ),
        (
            "[[approvals.rules]]\narguments = { force = true }\n",
            "approvals.rules[0].arguments",
            "'force' is not a JSON Pointer",
        ),
        ("[[approvals.rules]]\nwhen_ = {}\n", "approvals.rules[0].when_", "unknown key"),
    ],
)
def test_bad_approvals_tables_are_refused(
    tmp_path: Path, approvals: str, key: str, rule: str
) -> None:
    config = write_config(tmp_path, approvals)
    with pytest.raises(ConfigError) as caught:
        asyncio.run(load_toolset(config).__aenter__())
    assert caught.value.fields["key"] == key
    assert caught.value.fields["rule"].startswith(rule)


def test_argument_predicates_use_json_pointers_and_json_equality() -> None:
    from toolproof.contract.tools import ToolAnnotations
    from toolproof.extensions.approvals import ApprovalPolicy, compile_rules

    policy = ApprovalPolicy.model_validate(
        {"rules": [{"arguments": {"/opts/0/a~1b": True, "/n": 1}}, {"when": {"title": "x"}}]}
    )
    (rule,) = compile_rules(policy, ToolAnnotations()) or ()
    assert rule.matches({"opts": [{"a/b": True}], "n": 1.0})
    assert not rule.matches({"opts": [{"a/b": 1}], "n": 1})  # 1 is not true
    assert not rule.matches({"opts": [{"a/b": True}], "n": True})  # true is not 1
    assert not rule.matches({"opts": [], "n": 1})
    assert rule.matches({"opts": {"0": {"a/b": True}}, "n": 1})  # RFC 6901: "0" names a key too
    assert compile_rules(ApprovalPolicy(), ToolAnnotations()) is None
    titled = compile_rules(policy, ToolAnnotations(title="x")) or ()
    assert [r.index for r in titled] == [0, 1]


def test_a_recorded_rule_rebuilds_the_same_compiled_rule() -> None:
    from toolproof.contract.approval_rules import rule_from_record
    from toolproof.contract.tools import ToolAnnotations
    from toolproof.extensions.approvals import ApprovalPolicy, compile_rules

    policy = ApprovalPolicy.model_validate({"rules": [{"arguments": {"/opts/0/a~1b": True}}]})
    (rule,) = compile_rules(policy, ToolAnnotations()) or ()
    assert dict(rule.record) == {"index": 0, "when": {}, "arguments": {"/opts/0/a~1b": True}}
    rebuilt = rule_from_record(rule.record)
    assert (rebuilt.index, rebuilt.arguments) == (rule.index, rule.arguments)
    assert rebuilt.matches({"opts": [{"a/b": True}]})
    assert not rebuilt.matches({"opts": [{"a/b": 1}]})
    with pytest.raises(ValueError, match=r"^a recorded rule needs an integer 'index', not '0'$"):
        rule_from_record({"index": "0", "arguments": {}})
    with pytest.raises(ValueError, match=r"^rule 2: 'force' is not a JSON Pointer \(RFC 6901"):
        rule_from_record({"index": 2, "arguments": {"force": True}})
    with pytest.raises(ValueError, match=r"^rule 1: 'arguments' must be an object"):
        rule_from_record({"index": 1, "arguments": ["/force"]})


def test_replay_session_serves_the_recorded_decision_and_never_asks(tmp_path: Path) -> None:
    from toolproof import replay_session

    config = write_config(tmp_path)
    side = tmp_path / "side.txt"
    approver = Asked(True)
    arguments = {"path": str(side), "branch": "b1"}

    async def agent(session: Any) -> None:
        assert (await session.toolset[GATED].call(arguments)).value == "deleted b1"

    async def main() -> Any:
        async with record_session(config, root=tmp_path / "root", task="t", approver=approver) as s:
            await agent(s)
        assert s.run_id is not None
        return await replay_session(tmp_path / "root" / "runs" / s.run_id, agent, toolset=config)

    replayed = asyncio.run(main())
    assert (replayed.identical, replayed.calls, replayed.live_calls) == (True, 1, 0)
    assert len(approver.requests) == 1  # asked while recording, never on replay
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"


def test_a_store_that_vanishes_mid_decision_denies_and_records_it(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    side = tmp_path / "side.txt"
    store_path = tmp_path / "approvals.sqlite"

    async def vanishing(request: ApprovalRequest) -> bool:
        for path in tmp_path.glob("approvals.sqlite*"):
            path.unlink()
        store_path.mkdir()  # the decision cannot be written: the store is gone
        return True

    async def main() -> tuple[str, Any]:
        async with record_session(
            config, root=tmp_path / "root", task="t", approver=vanishing
        ) as s:
            result = await s.toolset[GATED].call({"path": str(side), "branch": "b1"})
        assert s.run_id is not None
        return s.run_id, result

    run_id, result = asyncio.run(main())
    assert not side.exists()
    assert result.failure.kind == "approval_denied"
    assert result.failure.detail["reason"].startswith(
        "the decision could not be stored: OperationalError: unable to open database file"
    )
    run = tmp_path / "root" / "runs" / run_id
    _, decided, _ = approval_events(run)
    assert (decided["decision"], decided["who"], decided["channel"]) == (
        "deny",
        "toolproof",
        "fail-closed",
    )
    assert verify_run(run).ok


def test_a_pending_request_outlives_its_process_and_the_retry_runs_after_it(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, '[approvals]\nmode = "defer"\n')
    side = tmp_path / "side.txt"
    arguments = {"path": str(side), "branch": "b1"}
    store = ApprovalStore(tmp_path / "approvals.sqlite")

    async def before() -> str:
        async with load_toolset(config) as toolset:
            pending = await toolset[GATED].call(arguments)
        return str(pending.failure.detail["handle"])

    async def after(handle: str) -> Any:
        async with load_toolset(config) as toolset:  # a new Toolset: the server restarted
            return await toolset[GATED].call({**arguments, "approval_handle": handle})

    handle = asyncio.run(before())
    row = store.require(handle)
    assert row.status == "pending"
    store.decide(
        handle, approve=True, who="bob", channel="cli", approved_digest=row.arguments_digest
    )
    assert asyncio.run(after(handle)).value == "deleted b1"
    assert store.require(handle).status == "consumed"
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"


def test_a_decision_after_the_deadline_is_refused_and_the_request_denied(tmp_path: Path) -> None:
    import time

    from toolproof.errors import InputError

    store = ApprovalStore(tmp_path / "approvals.sqlite")
    row = store.create(
        tool=GATED,
        fingerprint=digest_json({}),
        arguments_digest=digest_json({"branch": "b1"}),
        arguments={"branch": "b1"},
        call_id=None,
        rule=None,
        mode="wait",
        timeout_seconds=0.05,
    )
    time.sleep(0.2)
    with pytest.raises(InputError) as caught:
        store.decide(
            row.id, approve=True, who="alice", channel="cli", approved_digest=row.arguments_digest
        )
    assert caught.value.message == (
        f"approval request {row.id!r} is denied (no decision within 0.05 s (timeout)), not "
        "pending (rule: a request is decided once, before its deadline)"
    )
    denied = store.require(row.id)
    assert (denied.status, denied.who, denied.channel) == ("denied", "toolproof", "fail-closed")
