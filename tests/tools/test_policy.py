"""Issue 35 point 1: Cedar ``[policy]`` over recorded calls (docs/policy.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import cedarpy
import policy_fixture_tools as tool_fixtures
import pytest
from mcp import Client

from toolproof import ConfigError, Tool, load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.adapters.session_runs import record_session
from toolproof.contract.tools import ToolResult
from toolproof.tools.policy import PolicyError, PolicySet, cedar_request, tool_attributes
from toolproof.tools.policy_source import for_tool
from toolproof.verify.verifier import verify_run

HERE = Path(__file__).resolve().parent

SMALL = """@id("small-transfers")
permit(principal == Agent::"triage", action == Action::"call_tool", resource == Tool::"transfer")
when { context.arguments.amount < 500 };
"""
NO_PURGE = """@id("no-destructive")
forbid(principal, action, resource) when { resource.destructive };
"""


def write(tmp_path: Path, policies: dict[str, str], default: str = "deny") -> Path:
    folder = tmp_path / "policies"
    folder.mkdir(exist_ok=True)
    for name, text in policies.items():
        (folder / name).write_text(text, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{HERE}"\n\n'
        f'[policy]\nfiles = ["policies/*.cedar"]\ndefault = "{default}"\n',
        encoding="utf-8",
    )
    return config


def trace(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]


def session(
    config: Path, root: Path, calls: list[tuple[str, dict[str, Any]]], principal: str | None
) -> tuple[list[ToolResult], Path]:
    async def main() -> tuple[list[ToolResult], str]:
        async with record_session(config, root=root, task="t", principal=principal) as s:
            results = [await s.call(name, arguments) for name, arguments in calls]
        assert s.run_id is not None
        return results, s.run_id

    results, run_id = asyncio.run(main())
    return results, root / "runs" / run_id


def test_a_permit_allows_and_a_call_it_does_not_cover_is_denied_without_running(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, {"transfer.cedar": SMALL})
    small, big = tmp_path / "small", tmp_path / "big"
    results, run = session(
        config,
        tmp_path / "root",
        [
            ("transfer", {"to": "bob", "amount": 100, "marker": str(small)}),
            ("transfer", {"to": "bob", "amount": 1000, "marker": str(big)}),
        ],
        "Agent::triage",
    )
    assert results[0].value == "sent 100 to bob"
    assert small.read_text(encoding="utf-8") == "bob 100\n"
    denied = results[1].failure
    assert denied is not None and not big.exists()  # the body never ran
    digest = PolicySet((("policies/transfer.cedar", SMALL),), "deny").digest
    assert (denied.kind, denied.where, denied.message, denied.detail) == (
        "denied_by_policy",
        "runtime",
        "call to 'transfer' by Agent::triage denied by policy: determining none (default 'deny')",
        {"determining": [], "digest": digest, "principal": "Agent::triage", "errors": []},
    )
    events = trace(run)
    decided = [e for e in events if e["type"] == "policy_decided"]
    for e in decided:  # whole seconds since the session began: not pinned (wall clock)
        assert type(e["request"]["context"].pop("elapsed_seconds")) is int
    request = {
        "principal": "Agent::triage",
        "tool": "transfer",
        "attributes": {
            "read_only": False,
            "destructive": False,
            "source": "python:policy_fixture_tools.transfer",
            "server": "",
        },
    }
    assert [
        {k: e[k] for k in ("digest", "decision", "determining", "errors", "request")}
        for e in decided
    ] == [
        {
            "digest": digest,
            "decision": "allow",
            "determining": ["small-transfers"],
            "errors": [],
            "request": {
                **request,
                "context": {
                    "arguments": {"to": "bob", "amount": 100, "marker": str(small)},
                    "calls": 0,
                    "total_calls": 0,
                },
            },
        },
        {
            "digest": digest,
            "decision": "deny",
            "determining": [],
            "errors": [],
            "request": {
                **request,
                "context": {
                    "arguments": {"to": "bob", "amount": 1000, "marker": str(big)},
                    "calls": 1,
                    "total_calls": 1,
                },
            },
        },
    ]
    # policy_decided opens each call's block, right before its tool_called
    kinds = [e["type"] for e in events if e["type"] in ("policy_decided", "tool_called")]
    assert kinds == ["policy_decided", "tool_called"] * 2
    for e in decided:
        assert events[e["idx"] + 1]["type"] == "tool_called"
        assert events[e["idx"] + 1]["call_id"] == e["call_id"]
    runtime = json.loads((run / "runtime.json").read_bytes())
    assert runtime["toolset"]["policy"] == {
        "default": "deny",
        "files": [{"name": "policies/transfer.cedar", "text": SMALL}],
        "digest": digest,
        "tools": {  # each tool's attributes as bound, which the policy check holds to
            "purge": {
                "read_only": False,
                "destructive": True,
                "source": "python:policy_fixture_tools.purge",
                "server": "",
            },
            "transfer": request["attributes"],
        },
    }
    assert verify_run(run).ok


def test_a_forbid_names_its_id_and_the_default_allow_lets_the_rest_through(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, {"a.cedar": NO_PURGE}, default="allow")
    marker = tmp_path / "purged"
    results, run = session(
        config,
        tmp_path / "root",
        [
            ("transfer", {"to": "ann", "amount": 9000, "marker": str(tmp_path / "t")}),
            ("purge", {"marker": str(marker)}),
        ],
        None,
    )
    assert results[0].value == "sent 9000 to ann"
    failure = results[1].failure
    assert failure is not None and not marker.exists()
    assert failure.message == (
        "call to 'purge' by Agent::default denied by policy: determining no-destructive"
    )
    assert failure.detail["determining"] == ["no-destructive"]
    decided = [e for e in trace(run) if e["type"] == "policy_decided"]
    assert [(e["decision"], e["determining"]) for e in decided] == [
        ("allow", []),
        ("deny", ["no-destructive"]),
    ]
    assert decided[1]["request"]["attributes"]["destructive"] is True
    assert decided[1]["request"]["principal"] == "Agent::default"


def test_invalid_arguments_are_refused_before_any_decision(tmp_path: Path) -> None:
    config = write(tmp_path, {"transfer.cedar": SMALL})
    results, run = session(
        config, tmp_path / "root", [("transfer", {"to": "bob"})], "Agent::triage"
    )
    assert results[0].failure is not None and results[0].failure.kind == "invalid_arguments"
    assert [e for e in trace(run) if e["type"] == "policy_decided"] == []


def test_a_float_argument_cedar_cannot_hold_fails_closed_with_cedars_error(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, {"transfer.cedar": SMALL}, default="allow")
    (tmp_path / "float_tools.py").write_text(
        "import toolproof\n\n@toolproof.tool\nasync def pay(amount: float) -> str:\n"
        '    """Pay."""\n    return "paid"\n',
        encoding="utf-8",
    )
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text + f'\n[[python]]\nmodule = "float_tools"\npath = "{tmp_path}"\n', encoding="utf-8"
    )
    results, _ = session(config, tmp_path / "root", [("pay", {"amount": 1.5})], None)
    failure = results[0].failure
    assert failure is not None and failure.kind == "denied_by_policy"
    assert failure.detail["errors"] == [
        "failed to build request: data did not match any variant of untagged enum RawCedarValueJson"
    ]


def _load_refusal(config: Path) -> str:
    """The message of the ConfigError that loading ``config`` raises."""

    async def main() -> None:
        async with load_toolset(config):
            pass

    with pytest.raises(ConfigError) as caught:
        asyncio.run(main())
    return str(caught.value)


def test_a_policy_file_cedar_cannot_parse_is_refused_at_load(tmp_path: Path) -> None:
    config = write(
        tmp_path, {"good.cedar": SMALL, "bad.cedar": "permit(principal, action, resource)\n"}
    )
    assert _load_refusal(config) == (
        f"{config}: policy.files: policy file policies/bad.cedar:1: Cedar cannot parse it: "
        "unexpected end of input (rule: Cedar policy syntax, "
        "https://docs.cedarpolicy.com/policies/syntax-policy.html)"
    )


def test_a_glob_matching_no_file_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path, {})
    assert _load_refusal(config) == (
        f"{config}: policy.files[0]: glob 'policies/*.cedar' matches no file"
    )


def test_a_principal_that_is_not_type_and_id_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path, {"transfer.cedar": SMALL})
    with pytest.raises(PolicyError) as caught:
        session(config, tmp_path / "root", [], "triage")
    assert str(caught.value) == (
        "principal 'triage': expected 'Type::id' (e.g. 'Agent::triage'; rule: a Cedar entity "
        "type, '::', then the id)"
    )


def test_the_policy_text_is_part_of_the_toolset_descriptor(tmp_path: Path) -> None:
    async def descriptor(policies: dict[str, str]) -> str:
        async with load_toolset(write(tmp_path, policies)) as tools:
            return tools.descriptor().id

    first = asyncio.run(descriptor({"transfer.cedar": SMALL}))
    second = asyncio.run(descriptor({"transfer.cedar": SMALL.replace("500", "400")}))
    assert first != second


def test_a_served_call_is_decided_and_a_denied_one_never_runs(tmp_path: Path) -> None:
    config = write(tmp_path, {"a.cedar": NO_PURGE}, default="allow")
    marker = tmp_path / "purged"

    async def main() -> tuple[Any, Any]:
        async with load_toolset(config) as tools, Client(build_server(tools)) as client:
            sent = await client.call_tool(
                "transfer", {"to": "ann", "amount": 5, "marker": str(tmp_path / "t")}
            )
            purged = await client.call_tool("purge", {"marker": str(marker)})
            return sent, purged

    sent, purged = asyncio.run(main())
    assert not sent.is_error and not marker.exists()
    assert purged.is_error
    assert purged.content[0].text == (
        "denied_by_policy: call to 'purge' by Agent::default denied by policy: determining "
        "no-destructive"
    )


def test_a_decision_asks_cedar_only_the_policies_whose_scope_admits_the_tool() -> None:
    text = (
        'permit(principal, action, resource == Tool::"other");\n'
        '@id("few") permit(principal, action, resource == Tool::"transfer") '
        "when { context.calls < 5 };\n"
        "forbid(principal, action, resource is Tool) when { context.arguments.x == 1 };\n"
        'permit(principal, action, resource == Account::"transfer");\n'
        "permit(principal, action, resource) when { context.arguments.y == 2 };\n"
    )
    policy = PolicySet((("p.cedar", text),), "deny")
    whole = json.loads(cedarpy.policies_to_json_str(text))
    subset = for_tool(whole, "transfer")
    assert subset is not None
    assert sorted(subset["staticPolicies"]) == ["policy1", "policy2", "policy4"]
    assert for_tool(whole, "other") is not None
    request = cedar_request(
        "Agent::a",
        "transfer",
        {"read_only": False, "destructive": False, "source": "python:m.transfer", "server": ""},
        {"amount": 1},
        {"calls": 0, "total_calls": 0, "elapsed_seconds": 0},
    )
    decision = policy.decide(request)
    # the whole set, asked directly, answers the same: same ids, same errors
    entities = cedarpy.Entities.from_json_str(
        json.dumps(
            [
                {
                    "uid": {"type": "Tool", "id": "transfer"},
                    "attrs": request["attributes"],
                    "parents": [],
                }
            ]
        )
    )
    answer = cedarpy.is_authorized(
        {
            "principal": {"type": "Agent", "id": "a"},
            "action": 'Action::"call_tool"',
            "resource": {"type": "Tool", "id": "transfer"},
            "context": request["context"],
        },
        text,
        entities,
    )
    names = answer.diagnostics.id_annotations_by_reason
    assert (decision.decision, decision.determining, decision.errors) == (
        "allow",
        tuple(sorted(names.get(r, r) for r in answer.diagnostics.reasons)),
        tuple(sorted(str(e) for e in answer.diagnostics.errors)),
    )
    assert decision.determining == ("few",)
    assert decision.errors == (
        "error while evaluating policy `policy2`: record does not have the attribute `x`",
        "error while evaluating policy `policy4`: record does not have the attribute `y`",
    )


def test_a_tool_from_an_mcp_server_names_its_server() -> None:
    async def body(arguments: dict[str, Any]) -> Any:
        return "x"

    plain = Tool.from_function(tool_fixtures.purge)
    served = Tool(plain.spec, body, source="mcp:bank")
    assert tool_attributes(served) == {
        "read_only": False,
        "destructive": True,
        "source": "mcp:bank",
        "server": "bank",
    }
    assert tool_attributes(plain)["server"] == ""
