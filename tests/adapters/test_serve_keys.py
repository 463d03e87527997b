"""``toolproof serve --record``: each served call runs with its idempotency key (issue 34).

The official ``mcp`` client drives ``toolproof serve --record`` over stdio; the served
tool is imported from ``tests/fixtures/mcp_key_server.py``, which answers the key its
request's ``_meta`` carried. When the client closes the server's stdin the session
becomes a run whose ``tool_called`` events hold the same keys, and which verifies.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from toolproof.verify.verifier import verify_run

KEY_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_key_server.py"
TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]


@pytest.mark.timeout(120)
def test_a_served_call_sends_its_key_upstream_and_records_it(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "pay"\ncommand = "{sys.executable}"\nargs = ["{KEY_SERVER}"]\n'
        '\n[tools.pay_charge]\nidempotency = "key"\nextensions = ["retry"]\n',
        encoding="utf-8",
    )
    root = tmp_path / "root"
    server = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(config), "--record", str(root)],
    )

    async def drive() -> list[str]:
        async with Client(server, mode="legacy") as client:
            answers = [
                await client.call_tool("pay_charge_retry", {"order": "A-1"}),
                await client.call_tool("pay_charge_retry", {"order": "A-1"}),
            ]
        return [answer.content[0].text for answer in answers]  # type: ignore[union-attr]

    keys = asyncio.run(drive())
    [run] = list((root / "runs").iterdir())
    lines = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    called = [json.loads(line) for line in lines if '"tool_called"' in line]
    assert [event["idempotency_key"] for event in called] == keys
    assert keys[0] != keys[1] and all(key.startswith("idem_") for key in keys)
    assert verify_run(run).ok is True
