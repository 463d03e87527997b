"""``toolproof approvals``: a person decides from another process while a call waits."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from toolproof import ApprovalStore, load_toolset
from toolproof.adapters.session_runs import record_session
from toolproof.verify.verifier import verify_run

TOOLPROOF = str(Path(sys.executable).parent / "toolproof")
FIXTURES = Path(__file__).resolve().parent.parent / "extensions"
GATED = "delete_branch_approve"


def _config(tmp_path: Path, approvals: str = "") -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[python]]\nmodule = "approve_fixture_tools"\npath = "{FIXTURES}"\n\n'
        f'[tools.delete_branch]\nextensions = [["approve"]]\n\n[approvals]\n{approvals}',
        encoding="utf-8",
    )
    return config


async def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    process = await asyncio.create_subprocess_exec(
        TOOLPROOF,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return subprocess.CompletedProcess(args, process.returncode, out.decode(), err.decode())


async def _pending(store: ApprovalStore) -> str:
    for _ in range(600):
        if store.path.exists() and (rows := store.list()):
            return rows[0].id
        await asyncio.sleep(0.05)
    raise AssertionError("no request became pending")


def test_a_cli_approval_from_another_process_releases_the_waiting_call(tmp_path: Path) -> None:
    config = _config(tmp_path, "timeout_seconds = 120\n")
    side = tmp_path / "side.txt"
    store = ApprovalStore(tmp_path / "approvals.sqlite")

    async def main() -> tuple[str, list[subprocess.CompletedProcess[str]]]:
        async with record_session(config, root=tmp_path / "root", task="t") as session:
            call = asyncio.create_task(
                session.toolset[GATED].call({"path": str(side), "branch": "b1"})
            )
            request = await _pending(store)
            assert not side.exists()
            listed = await _cli("approvals", "list", "--store", str(store.path), "--json")
            shown = await _cli("approvals", "show", request, "--store", str(store.path))
            approved = await _cli(
                "approvals", "approve", request, "--store", str(store.path), "--reason", "ok"
            )
            result = await call
            assert result.value == "deleted b1", result.failure
        assert session.run_id is not None
        return session.run_id, [listed, shown, approved]

    run_id, (listed, shown, approved) = asyncio.run(main())
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"
    (row,) = json.loads(listed.stdout)["requests"]
    assert (row["tool"], row["status"], row["arguments"]) == (
        GATED,
        "pending",
        {"branch": "b1", "path": str(side)},
    )
    assert f"tool      {GATED}" in shown.stdout
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"{row['id']}: approve by {getpass.getuser()}\n"
    run = tmp_path / "root" / "runs" / run_id
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    (decided,) = [e for e in events if e["type"] == "approval_decided"]
    assert (decided["who"], decided["channel"], decided["reason"]) == (
        getpass.getuser(),
        "cli",
        "ok",
    )
    assert verify_run(run).ok


def test_a_cli_denial_and_an_edit_and_their_refusals(tmp_path: Path) -> None:
    config = _config(tmp_path, 'mode = "defer"\n')
    side = tmp_path / "side.txt"
    store_path = tmp_path / "approvals.sqlite"

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with load_toolset(config) as toolset:
            tool = toolset[GATED]
            first = await tool.call({"path": str(side), "branch": "b1", "force": True})
            second = await tool.call({"path": str(side), "branch": "b2"})
            h1, h2 = first.failure.detail["handle"], second.failure.detail["handle"]
            store = str(store_path)
            edit = json.dumps({"path": str(side), "branch": "b1", "force": False})
            out["edit"] = await _cli("approvals", "approve", h1, "--store", store, "--edit", edit)
            out["deny"] = await _cli(
                "approvals", "deny", h2, "--store", store, "--reason", "no", "--json"
            )
            out["again"] = await _cli("approvals", "approve", h2, "--store", store)
            out["bad_edit"] = await _cli(
                "approvals", "approve", h2, "--store", store, "--edit", "[1]"
            )
            out["unknown"] = await _cli("approvals", "show", "apr_" + "0" * 32, "--store", store)
            out["no_store"] = await _cli(
                "approvals", "list", "--store", str(tmp_path / "nope.sqlite")
            )
            out["ran"] = await tool.call(
                {"path": str(side), "branch": "b1", "force": True, "approval_handle": h1}
            )
            out["denied"] = await tool.call(
                {"path": str(side), "branch": "b2", "approval_handle": h2}
            )
        return out

    out = asyncio.run(main())
    assert out["edit"].returncode == 0, out["edit"].stderr
    denied_row = json.loads(out["deny"].stdout)
    assert (denied_row["status"], denied_row["reason"]) == ("denied", "no")
    assert out["again"].returncode == 1
    assert "is denied, not pending (rule: a request is decided once" in out["again"].stderr
    assert out["bad_edit"].returncode == 1
    assert "--edit: the arguments must be a JSON object, not list" in out["bad_edit"].stderr
    assert out["unknown"].returncode == 1
    assert "no approval request 'apr_0000" in out["unknown"].stderr
    assert out["no_store"].returncode == 1
    assert "no approvals store there" in out["no_store"].stderr
    assert not (tmp_path / "nope.sqlite").exists()
    assert out["ran"].value == "deleted b1"
    assert out["denied"].failure.kind == "approval_denied"
    assert side.read_text(encoding="utf-8") == "b1 force=False\n"  # the edit, not force=True
