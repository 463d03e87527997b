"""The temporal backend against a real Temporal dev server and a real ``toolproof worker``.

The server comes from :func:`temporal_support.require_temporal` (under ``CI=true`` a
missing server fails, never skips); the worker is ``toolproof worker --config FILE
--engine temporal`` in its own process, on a task queue of this module's own.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporal_support import require_temporal
from temporalio.client import Client

import toolproof
from toolproof.config import load_toolset
from toolproof.contract.tools import ToolResult

TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]

TOOLS = '''\
import time
from pathlib import Path

import toolproof


@toolproof.tool(idempotent=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@toolproof.tool(idempotency="key")
def charge(order: str, cents: int, context: toolproof.Context) -> str:
    """Charge an order once per idempotency key; return the key."""
    return str(context.idempotency_key)


@toolproof.tool
def send(text: str) -> str:
    """Send a message (neither idempotent nor keyed)."""
    return text


@toolproof.tool
def nap(seconds: float) -> float:
    """Sleep, then return the seconds slept."""
    time.sleep(seconds)
    return seconds


@toolproof.tool(read_only=True)
def linger(seconds: float) -> float:
    """Sleep (a read-only wait), then return the seconds slept."""
    time.sleep(seconds)
    return seconds


@toolproof.tool(idempotency="key")
def charge_slowly(order: str, context: toolproof.Context) -> str:
    """Charge once per key (the ledger holds the keys charged), then take 60 s to answer."""
    key = str(context.idempotency_key)
    ledger = Path(__file__).parent / "ledger.txt"
    if ledger.exists() and key in ledger.read_text("utf-8").split():
        return "charged before"
    with ledger.open("a", encoding="utf-8") as handle:
        handle.write(key + "\\n")
    time.sleep(60)  # the test kills the worker here, after the side effect
    return "charged"
'''


@dataclass
class Setup:
    config: Path
    address: str
    worker: subprocess.Popen[bytes]


KILL_QUEUE = f"toolproof-kill-{uuid.uuid4()}"


def _toml(address: str, queue: str) -> str:
    return (
        '[[python]]\nmodule = "temporal_tools"\n\n'
        '[tools.add]\nextensions = [["temporal"]]\n\n'
        '[tools.charge]\nextensions = [["temporal"]]\n\n'
        '[tools.send]\nextensions = [["temporal"]]\n\n'
        "[tools.nap]\n"
        'extensions = [[{ name = "temporal", config = { timeout = 1 } }]]\n\n'
        "[tools.linger]\n"
        'extensions = [[{ name = "temporal", config = { timeout = 90 } }]]\n\n'
        "[tools.charge_slowly]\n"
        'extensions = [[{ name = "temporal", config = { timeout = 90, task_queue = '
        f'"{KILL_QUEUE}" }} }}]]\n\n'
        f'[backends.temporal]\naddress = "{address}"\ntask_queue = "{queue}"\n'
        "grace = 20\nheartbeat = 2\n"
    )


def _worker(config: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start ``toolproof worker --engine temporal`` and wait until it polls."""
    with log.open("wb") as handle:
        worker = subprocess.Popen(
            [*TOOLPROOF, "worker", "--config", str(config), "--engine", "temporal", *args],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while b"toolproof worker:" not in log.read_bytes():
        if worker.poll() is not None or time.monotonic() > deadline:
            _end(worker)
            raise AssertionError(f"worker did not start:\n{log.read_text('utf-8')}")
        time.sleep(0.05)
    return worker


def _end(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    try:
        worker.wait(15)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    address = require_temporal()
    folder = tmp_path_factory.mktemp("temporal")
    (folder / "temporal_tools.py").write_text(TOOLS, encoding="utf-8")
    config = folder / "toolproof.toml"
    config.write_text(_toml(address, f"toolproof-test-{uuid.uuid4()}"), encoding="utf-8")
    worker = _worker(config, folder / "worker.log")
    try:
        yield Setup(config, address, worker)
    finally:
        _end(worker)


def _calls(config: Path, *calls: tuple[str, dict[str, Any]]) -> list[ToolResult]:
    async def go() -> list[ToolResult]:
        async with load_toolset(config) as toolset:
            return [await toolset[name].call(arguments) for name, arguments in calls]

    return asyncio.run(go())


def _recorded(setup: Setup, tool: str, arguments: dict[str, Any]) -> tuple[str, ToolResult]:
    """Call ``tool`` in a recording session; its recorded key and its result."""
    root = setup.config.parent / f"runs-{uuid.uuid4()}"

    async def go() -> tuple[str, ToolResult]:
        async with load_toolset(setup.config) as toolset:
            async with toolproof.record_session(toolset, root=root, task="Temporal.") as session:
                result = await session.call(tool, arguments)
            assert session.run_id is not None
            trace = (root / "runs" / session.run_id / "trace.jsonl").read_text("utf-8")
            called = [json.loads(x) for x in trace.splitlines() if '"tool_called"' in x]
            assert [event["call"]["tool"] for event in called] == [tool]
            return str(called[0]["idempotency_key"]), result

    return asyncio.run(go())


def _scheduled(address: str, workflow_id: str, field: str = "scheduled") -> Any:
    """The ``ActivityTask<Field>`` attributes in the history of ``workflow_id``."""
    name = f"activity_task_{field}_event_attributes"

    async def go() -> Any:
        client = await Client.connect(address)
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        found = [getattr(event, name) for event in history.events if event.HasField(name)]
        assert len(found) == 1
        return found[0]

    return asyncio.run(go())


def test_a_call_round_trips_with_the_local_result(setup: Setup) -> None:
    remote, local = _calls(
        setup.config, ("add_temporal", {"a": 40, "b": 2}), ("add", {"a": 40, "b": 2})
    )
    assert remote.ok and remote.value == 42
    assert remote.value == local.value
    bad = _calls(setup.config, ("add_temporal", {"a": "forty", "b": 2}))[0]
    assert bad.failure is not None and bad.failure.kind == "invalid_arguments"


def test_activity_id_is_the_idempotency_key_and_retries_follow_the_declaration(
    setup: Setup,
) -> None:
    key, result = _recorded(setup, "charge_temporal", {"order": "A-1", "cents": 500})
    assert key.startswith("idem_") and result.value == key  # the body read the same key
    scheduled = _scheduled(setup.address, key)
    assert scheduled.activity_id == key
    assert scheduled.activity_type.name == "toolproof.run"
    assert scheduled.retry_policy.maximum_attempts == 3  # keyed: retried as configured


def test_a_tool_neither_idempotent_nor_keyed_gets_one_attempt(setup: Setup) -> None:
    key, result = _recorded(setup, "send_temporal", {"text": "hello"})
    assert result.value == "hello"
    scheduled = _scheduled(setup.address, key)
    assert scheduled.activity_id == key
    assert scheduled.retry_policy.maximum_attempts == 1


def test_a_timeout_is_a_tool_failure_of_kind_timeout(setup: Setup) -> None:
    result = _calls(setup.config, ("nap_temporal", {"seconds": 5}))[0]
    assert result.failure is not None
    assert result.failure.kind == "timeout"
    assert result.failure.where == "backend"
    assert result.failure.detail is not None
    assert result.failure.detail["timeout_type"] == "START_TO_CLOSE"
    assert result.failure.message.startswith("temporal activity toolproof-")


def test_a_worker_killed_mid_activity_never_acts_twice_for_a_keyed_tool(setup: Setup) -> None:
    folder = setup.config.parent
    ledger = folder / "ledger.txt"
    first = _worker(setup.config, folder / "kill-a.log", "--queue", KILL_QUEUE)
    second: subprocess.Popen[bytes] | None = None
    outcome: list[tuple[str, ToolResult]] = []
    caller = threading.Thread(
        target=lambda: outcome.append(_recorded(setup, "charge_slowly_temporal", {"order": "B-7"}))
    )
    caller.start()
    try:
        deadline = time.monotonic() + 60
        while not (ledger.exists() and ledger.read_text("utf-8").strip()):
            assert time.monotonic() < deadline, "the body never ran"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)  # mid-activity, after the side effect
        first.wait()
        second = _worker(setup.config, folder / "kill-b.log", "--queue", KILL_QUEUE)
        caller.join(120)
        assert not caller.is_alive()
    finally:
        _end(first)
        if second is not None:
            _end(second)
    [(key, result)] = outcome
    assert result.value == "charged before"  # the retry found the key in the ledger
    assert ledger.read_text("utf-8").split() == [key]  # one side effect for the key
    assert _scheduled(setup.address, key).retry_policy.maximum_attempts == 3
    assert _scheduled(setup.address, key, "started").attempt == 2


def test_a_cancelled_workflow_is_a_tool_failure_of_kind_cancelled(setup: Setup) -> None:
    queue = tomllib.loads(setup.config.read_text("utf-8"))["backends"]["temporal"]["task_queue"]
    outcome: list[ToolResult] = []
    caller = threading.Thread(
        target=lambda: outcome.extend(_calls(setup.config, ("linger_temporal", {"seconds": 60})))
    )
    caller.start()

    async def cancel_it() -> str:
        client = await Client.connect(setup.address)
        query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            running = [w.id async for w in client.list_workflows(query)]
            if running:
                [workflow_id] = running
                await client.get_workflow_handle(workflow_id).cancel()
                return workflow_id
            await asyncio.sleep(0.1)
        raise AssertionError("the call never started a workflow")

    workflow_id = asyncio.run(cancel_it())
    caller.join(60)
    assert not caller.is_alive()
    [result] = outcome
    assert result.failure is not None
    assert result.failure.kind == "cancelled"
    assert result.failure.detail == {"workflow_id": workflow_id, "exception": "CancelledError"}


def test_an_unreachable_frontend_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "temporal_tools.py").write_text(TOOLS, encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens
    config = tmp_path / "toolproof.toml"
    config.write_text(
        _toml(f"127.0.0.1:{port}", "nowhere") + "connect_timeout = 1\n", encoding="utf-8"
    )
    [result] = _calls(config, ("add_temporal", {"a": 1, "b": 2}))
    assert result.failure is not None
    assert result.failure.kind == "unavailable"
    assert result.failure.message.startswith(f"temporal frontend 127.0.0.1:{port} is unreachable")
    assert result.failure.detail is not None
    assert result.failure.detail["address"] == f"127.0.0.1:{port}"
