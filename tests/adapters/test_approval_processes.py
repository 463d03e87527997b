"""Approvals with real parts: processes sharing the SQLite store, kill -9, MCP clients.

* ``toolproof serve --http`` (wait mode) holds an MCP call open on a pending request
  while another process (``toolproof approvals approve``, or ``serve-api``'s HTTP
  channel) approves it in the shared store.
* ``toolproof serve --http`` (defer mode) killed with SIGKILL while a request is
  pending, restarted, the request decided: the retry with the handle completes once.
* An MCP client of ``serve`` trying to approve through the protocol (elicitation
  answers, tool arguments, a forged handle, a forged tool) gets nothing.

The side-effect file counts the runs of the body.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
from approval_support import (
    APPROVER_TOKEN,
    RUNS_TOKEN,
    side_effects,
    write_approvers,
    write_gated_root,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from serve_helpers import TOOLPROOF, free_port, spawn, wait_listening

from toolproof import load_toolset
from toolproof.adapters.mcp.server import build_server
from toolproof.extensions.approvals.store import ApprovalStore

ALICE = {"Authorization": f"Bearer {APPROVER_TOKEN}"}


def _store(folder: Path) -> ApprovalStore:
    return ApprovalStore(folder / "approvals.sqlite")


def _wait_for_pending(folder: Path, count: int = 1, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (folder / "approvals.sqlite").exists():
            rows = _store(folder).list(status="pending")
            if len(rows) >= count:
                return [row.id for row in rows]
        time.sleep(0.05)
    raise AssertionError(f"no {count} pending request(s) in {folder} within {timeout} s")


async def _call(url: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    async with Client(streamable_http_client(url)) as client:
        return await client.call_tool(name, arguments)


def _serve(config: Path, port: int) -> list[str]:
    return ["serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]


def _api(folder: Path, port: int) -> list[str]:
    return [
        "serve-api",
        *("--root", str(folder), "--port", str(port)),
        *("--approvals-store", str(folder / "approvals.sqlite")),
        *("--approvers", str(write_approvers(folder))),
    ]


def test_a_waiting_serve_call_completes_when_another_process_approves(tmp_path: Path) -> None:
    config = write_gated_root(tmp_path, mode="wait")
    mcp_port, api_port = free_port(), free_port()
    url = f"http://127.0.0.1:{mcp_port}/mcp"
    with (
        spawn(_serve(config, mcp_port), mcp_port),
        spawn(_api(tmp_path, api_port), api_port, env={"TOOLPROOF_API_TOKEN": RUNS_TOKEN}),
    ):

        async def scenario() -> types.CallToolResult:
            call = asyncio.ensure_future(_call(url, "delete_branch_approve", {"branch": "f"}))
            (handle,) = await asyncio.to_thread(_wait_for_pending, tmp_path)
            assert side_effects(tmp_path) == []  # the server waits; nothing ran yet
            async with httpx.AsyncClient(timeout=60) as http:
                decided = await http.post(
                    f"http://127.0.0.1:{api_port}/v1/approvals/{handle}",
                    json={"decision": "approve", "reason": "ok"},
                    headers=ALICE,
                )
            assert decided.status_code == 200, decided.text
            return await asyncio.wait_for(call, 60)

        answered = asyncio.run(scenario())
    assert (answered.is_error, answered.structured_content) == (False, {"result": "deleted f"})
    (row,) = _store(tmp_path).list(status=None)
    assert (row.status, row.who, row.channel) == ("consumed", "alice", "http")
    assert side_effects(tmp_path) == ["f force=False"]


def test_a_waiting_serve_call_completes_when_the_cli_approves_from_another_process(
    tmp_path: Path,
) -> None:
    config = write_gated_root(tmp_path, mode="wait")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    store = str(tmp_path / "approvals.sqlite")
    with spawn(_serve(config, port), port):

        async def scenario() -> tuple[types.CallToolResult, subprocess.CompletedProcess[bytes]]:
            call = asyncio.ensure_future(_call(url, "delete_branch_approve", {"branch": "f"}))
            (handle,) = await asyncio.to_thread(_wait_for_pending, tmp_path)
            assert side_effects(tmp_path) == []
            approve = [*TOOLPROOF, "approvals", "approve", handle, "--store", store]
            done = await asyncio.to_thread(
                subprocess.run, [*approve, "--reason", "ok"], capture_output=True, timeout=60
            )
            return await asyncio.wait_for(call, 60), done

        answered, done = asyncio.run(scenario())
    assert done.returncode == 0, done.stderr
    assert (answered.is_error, answered.structured_content) == (False, {"result": "deleted f"})
    (row,) = _store(tmp_path).list(status=None)
    assert (row.status, row.who, row.channel, row.reason) == (
        "consumed",
        getpass.getuser(),
        "cli",
        "ok",
    )
    assert side_effects(tmp_path) == ["f force=False"]


def _start(args: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [*TOOLPROOF, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    wait_listening(process, port)
    return process


def test_kill_9_while_pending_then_restart_and_decide_runs_the_call_exactly_once(
    tmp_path: Path,
) -> None:
    config = write_gated_root(tmp_path, mode="defer")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    first = _start(_serve(config, port), port)
    try:
        deferred = asyncio.run(_call(url, "delete_branch_approve", {"branch": "f"}))
        assert deferred.is_error
        (handle,) = _wait_for_pending(tmp_path)
        assert handle in str(deferred.content[0].text)  # type: ignore[union-attr]
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        assert first.stderr is not None
        first.stderr.close()
    assert first.returncode == -signal.SIGKILL
    assert [row.id for row in _store(tmp_path).list(status="pending")] == [handle]
    api_port = free_port()
    with (
        spawn(_serve(config, port), port),
        spawn(_api(tmp_path, api_port), api_port, env={"TOOLPROOF_API_TOKEN": RUNS_TOKEN}),
    ):
        early = asyncio.run(
            _call(url, "delete_branch_approve", {"branch": "f", "approval_handle": handle})
        )
        assert early.is_error and "waits for a decision" in str(early.content[0].text)  # type: ignore[union-attr]
        decided = httpx.post(
            f"http://127.0.0.1:{api_port}/v1/approvals/{handle}",
            json={"decision": "approve"},
            headers=ALICE,
            timeout=60,
        )
        assert decided.status_code == 200, decided.text
        retry = {"branch": "f", "approval_handle": handle}
        done = asyncio.run(_call(url, "delete_branch_approve", retry))
        again = asyncio.run(_call(url, "delete_branch_approve", retry))
    assert (done.is_error, done.structured_content) == (False, {"result": "deleted f"})
    assert again.is_error
    assert "this request's approval was already used" in str(again.content[0].text)  # type: ignore[union-attr]
    assert side_effects(tmp_path) == ["f force=False"]
    assert _store(tmp_path).list(status="consumed")[0].id == handle


def test_an_mcp_client_cannot_approve_through_the_protocol(tmp_path: Path) -> None:
    config = write_gated_root(tmp_path, mode="defer")
    elicited: list[Any] = []

    async def accept_everything(context: Any, params: Any) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def scenario() -> dict[str, Any]:
        async with load_toolset(config) as toolset:
            client = Client(
                build_server(toolset), elicitation_callback=accept_everything, mode="legacy"
            )
            async with client:
                names = sorted(tool.name for tool in (await client.list_tools()).tools)
                first = await client.call_tool("delete_branch_approve", {"branch": "f"})
                handle = first.structured_content or {}
                (pending,) = _store(tmp_path).list(status="pending")
                with_handle = await client.call_tool(
                    "delete_branch_approve", {"branch": "f", "approval_handle": pending.id}
                )
                other_args = await client.call_tool(
                    "delete_branch_approve", {"branch": "main", "approval_handle": pending.id}
                )
                forged = await client.call_tool(
                    "delete_branch_approve", {"branch": "f", "approval_handle": "apr_" + "f" * 32}
                )
                refused = {}
                for name in ("delete_branch", "approvals_approve", "toolproof_approve"):
                    try:
                        await client.call_tool(name, {"id": pending.id, "branch": "f"})
                    except MCPError as exc:
                        refused[name] = exc.error.code
                return {
                    "names": names,
                    "first": (first.is_error, handle),
                    "texts": [
                        str(r.content[0].text)  # type: ignore[union-attr]
                        for r in (first, with_handle, other_args, forged)
                    ],
                    "refused": refused,
                    "pending": pending.id,
                }

    seen = asyncio.run(scenario())
    assert seen["names"] == ["delete_branch_approve", "list_branches"]
    assert seen["first"][0] is True
    pending = seen["pending"]
    first, with_handle, other_args, forged = seen["texts"]
    waits = f"approval_pending: call to 'delete_branch_approve' waits for a decision on {pending}"
    assert first.replace("request ", "", 1).startswith(waits)
    assert with_handle.replace("request ", "", 1).startswith(waits)
    assert other_args.startswith("approval_denied: ") and "approves nothing" in other_args
    assert forged.startswith("approval_denied: ") and "no such request in the store" in forged
    assert seen["refused"] == {
        "delete_branch": -32602,
        "approvals_approve": -32602,
        "toolproof_approve": -32602,
    }
    assert elicited == []  # the server never asks a client: MCP elicitation is not consent
    rows = _store(tmp_path).list(status=None)
    assert [(row.id, row.status) for row in rows] == [(pending, "pending")]
    assert side_effects(tmp_path) == []
