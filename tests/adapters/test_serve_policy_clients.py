"""Issue 35 point 1: in ``serve --http --clients``, a call's principal is its token's name."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import httpx2
from cli_support import toolproof
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_helpers import TOOLPROOF, free_port, spawn

from toolproof.verify.verifier import verify_run

TOOLS = Path(__file__).resolve().parents[1] / "tools"
POLICY = """@id("triage-small")
permit(principal == Agent::"triage", action == Action::"call_tool", resource == Tool::"transfer")
when { context.arguments.amount < 500 && context.calls < 2 };
"""
TRIAGE = "triage-token-0123456789"
SUPPORT = "support-token-0123456789"


def _config(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.cedar").write_text(POLICY, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "policy_fixture_tools"\npath = "{TOOLS}"\n\n'
        '[policy]\nfiles = ["policies/*.cedar"]\n',
        encoding="utf-8",
    )
    clients = tmp_path / "clients.toml"
    clients.write_text(f'triage = "{TRIAGE}"\nsupport = "{SUPPORT}"\n', encoding="utf-8")
    return config


async def _call(url: str, token: str, marker: Path) -> tuple[bool, str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        answer = await client.call_tool(
            "transfer", {"to": "bob", "amount": 100, "marker": str(marker)}
        )
        return answer.is_error, answer.content[0].text


def test_each_named_client_is_its_own_principal_with_its_own_counts(tmp_path: Path) -> None:
    config = _config(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    root = tmp_path / "root"
    args = ["serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]
    env = {"TOOLPROOF_MCP_TOKEN": ""}
    with spawn(
        [*args, "--clients", str(tmp_path / "clients.toml"), "--record", str(root)], port, env
    ):
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer " + "x" * 20})
        answers = [
            asyncio.run(_call(url, token, tmp_path / name))
            for token, name in ((TRIAGE, "t1"), (SUPPORT, "s1"), (TRIAGE, "t2"), (TRIAGE, "t3"))
        ]
    assert (wrong.status_code, wrong.json()["message"]) == (401, "wrong bearer token")
    assert answers == [
        (False, "sent 100 to bob"),
        (
            True,
            "denied_by_policy: call to 'transfer' by Agent::support denied by policy: "
            "determining none (default 'deny')",
        ),
        (False, "sent 100 to bob"),  # support's call did not count for triage
        (
            True,
            "denied_by_policy: call to 'transfer' by Agent::triage denied by policy: "
            "determining none (default 'deny')",
        ),
    ]
    assert [(tmp_path / name).exists() for name in ("t1", "s1", "t2", "t3")] == [
        True,
        False,
        True,
        False,
    ]
    (run,) = (root / "runs").iterdir()
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    decided: list[Any] = [
        (
            e["request"]["principal"],
            e["request"]["context"]["calls"],
            e["request"]["context"]["total_calls"],
            e["decision"],
            e["determining"],
        )
        for e in events
        if e["type"] == "policy_decided"
    ]
    assert decided == [
        ("Agent::triage", 0, 0, "allow", ["triage-small"]),
        ("Agent::support", 0, 0, "deny", []),
        ("Agent::triage", 1, 1, "allow", ["triage-small"]),
        ("Agent::triage", 2, 2, "deny", []),
    ]
    assert verify_run(run).ok
    # frozen replay serves the recorded decisions, each client's principal included
    answer = json.loads(toolproof("replay", str(run), "--json").stdout)
    assert (answer["identical"], answer["report_matches"], answer["live_calls"]) == (True, True, 0)


def _refused(*extra: str) -> tuple[int, str]:
    env = {key: value for key, value in os.environ.items() if key != "TOOLPROOF_MCP_TOKEN"}
    done = subprocess.run(
        [*TOOLPROOF, "serve", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return done.returncode, " ".join(done.stderr.split())


def test_clients_need_http_and_exclude_a_single_token(tmp_path: Path) -> None:
    config = _config(tmp_path)
    clients = str(tmp_path / "clients.toml")
    base = ["--config", str(config)]
    code, err = _refused(*base, "--clients", clients)
    assert code == 1
    assert "--clients needs --http HOST:PORT (over stdio the client is the parent)" in err
    (tmp_path / "token").write_text(TRIAGE + "\n", encoding="utf-8")
    http = ["--http", f"127.0.0.1:{free_port()}"]
    code, err = _refused(
        *base, *http, "--clients", clients, "--token-file", str(tmp_path / "token")
    )
    assert code == 1
    assert (
        "--clients and --token-file are two ways to say who may call: give one (--clients "
        "names each client's token; $TOOLPROOF_MCP_TOKEN is not used with it)"
    ) in err
    (tmp_path / "clients.toml").write_text(
        '"ops team" = "ops-token-0123456789"\n', encoding="utf-8"
    )
    code, err = _refused(*base, *http, "--clients", clients)
    assert code == 1
    assert f"--clients '{clients}': token name 'ops team' must match" in err
