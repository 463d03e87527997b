"""The idempotency key travels with a relocated call (issue 34 point 1).

The relocation request carries the running call's key (``idempotency_key``), and the
body in a real ``process`` worker reads the key the session recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

import toolproof
from toolproof.backends.protocol import ProtocolError, decode_request, encode_request
from toolproof.config import load_toolset

KEY = "idem_" + "ab" * 32

TOOLS = '''
import os

import toolproof


@toolproof.tool(idempotency="key")
def key_of(order: str, ctx: toolproof.Context) -> list:
    """The call's key and the process the body ran in."""
    return [ctx.idempotency_key, os.getpid()]
'''


def test_a_request_carries_the_key_it_is_given_and_none_outside_a_call() -> None:
    data = encode_request("add", {}, "sha256:ab", {}, KEY)
    assert json.loads(data)["idempotency_key"] == KEY
    assert decode_request(data).idempotency_key == KEY
    bare = encode_request("add", {}, "sha256:ab")
    assert "idempotency_key" not in json.loads(bare)
    assert decode_request(bare).idempotency_key == ""


@pytest.mark.parametrize("key", [7, "idem_xyz", "idem_" + "AB" * 32])
def test_a_malformed_key_field_is_refused(key: Any) -> None:
    message = {"protocol": 1, "variant": "a", "arguments": {}, "descriptor": "d"}
    with pytest.raises(ProtocolError) as caught:
        decode_request(json.dumps({**message, "idempotency_key": key}))
    assert caught.value.message == (
        "relocation protocol: request field 'idempotency_key' must be 'idem_' and 64 hex digits"
    )


def test_a_body_in_a_process_worker_reads_the_recorded_key(tmp_path: Path) -> None:
    (tmp_path / "idem_worker_tools.py").write_text(TOOLS, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[python]]\nmodule = "idem_worker_tools"\npath = "."\n\n'
        '[tools.key_of]\nextensions = [["process"]]\n',
        encoding="utf-8",
    )

    async def main() -> tuple[Any, Any, str | None]:
        async with load_toolset(config) as toolset:
            bare = (await toolset["key_of_process"].call({"order": "A-1"})).value
            async with toolproof.record_session(toolset, root=tmp_path, task="t") as session:
                keyed = (await session.call("key_of_process", {"order": "A-1"})).value
        return bare, keyed, session.run_id

    bare, keyed, run_id = asyncio.run(main())
    assert bare[0] is None and bare[1] != os.getpid()  # ran in a worker, no session: no key
    run = tmp_path / "runs" / str(run_id)
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    [called] = [json.loads(line) for line in lines if b'"tool_called"' in line]
    assert keyed[0] == called["idempotency_key"] and keyed[1] != os.getpid()
    assert toolproof.verify_run(run).ok is True
