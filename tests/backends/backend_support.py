"""Helpers for the backend tests: the fixture composition root and process checks.

The Celery tests flush their Redis database, so they never use a Redis someone else
runs: :func:`require_redis` starts a ``redis-server`` of their own on a free port
(nothing kept on disk), stopped when the test process exits. :data:`CONFIG` is the
fixture composition root with its broker pointed at that server.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from toolproof.backends import BackendRequest, ProcessPool
from toolproof.contract.tools import ToolResult

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "backends"
FIXTURE_CONFIG = FIXTURES / "toolproof.toml"
FIXTURE_BROKER = "redis://127.0.0.1:6379/15"
"""The broker the fixture file names; :data:`CONFIG` replaces it by :data:`REDIS_URL`."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


_HOME = Path(tempfile.mkdtemp(prefix="toolproof-backend-tests-"))
atexit.register(shutil.rmtree, _HOME, True)
REDIS_PORT = _free_port()
REDIS_URL = f"redis://127.0.0.1:{REDIS_PORT}/15"
"""The tests' own Redis (started by :func:`require_redis`)."""
_REDIS: list[subprocess.Popen[bytes]] = []

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    return asyncio.run(coro)


async def pool_call(
    pool: ProcessPool,
    variant: str,
    arguments: dict[str, Any],
    descriptor: str,
    *,
    timeout: float | None = None,
) -> ToolResult:
    """``pool.submit`` of the request ``(variant, arguments, descriptor, timeout)``."""
    return await pool.submit(BackendRequest(variant, arguments, descriptor, timeout))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:  # gone: FileNotFoundError, or ProcessLookupError while it exits
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in {"Z", "X"}


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return int(stat.rsplit(")", 1)[1].split()[1])


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` is alive; return those still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.02)
    return [pid for pid in pids if alive(pid)]


def wait_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if text:
                return text
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear within {timeout} s")


def copy_fixture(tmp_path: Path, toml: str | None = None) -> Path:
    """Copy the fixture tools into ``tmp_path``; write ``toml`` (default: the fixture's)."""
    for name in ("backend_tools.py", "backend_exts.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    config = tmp_path / "toolproof.toml"
    config.write_text(toml if toml is not None else CONFIG.read_text(encoding="utf-8"), "utf-8")
    return config


def _answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", REDIS_PORT), timeout=1):
            return True
    except OSError:
        return False


def stop_servers(servers: list[subprocess.Popen[bytes]]) -> None:
    """Terminate each server the tests started (kill one that is not gone in 10 s)."""
    for server in servers:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def require_redis() -> None:
    """Start the tests' own ``redis-server`` on :data:`REDIS_PORT` once, and wait for it.

    Without ``redis-server`` (or when it does not answer within 10 s) the test skips,
    except under ``CI=true``, where it fails.
    """
    if not _REDIS:
        binary = shutil.which("redis-server")
        if binary is None:
            _unavailable("redis-server is not installed")
        _REDIS.append(
            subprocess.Popen(
                [
                    binary,
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(REDIS_PORT),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(_HOME),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        atexit.register(stop_servers, _REDIS)
    deadline = time.monotonic() + 10
    while not _answers():
        if _REDIS[0].poll() is not None or time.monotonic() > deadline:
            _unavailable(f"the tests' redis-server on 127.0.0.1:{REDIS_PORT} does not answer")
        time.sleep(0.02)


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: a test that needs a service fails, never skips)")
    pytest.skip(message)


CONFIG = copy_fixture(
    _HOME, FIXTURE_CONFIG.read_text(encoding="utf-8").replace(FIXTURE_BROKER, REDIS_URL)
)
"""The fixture composition root (tools copied beside it), its broker :data:`REDIS_URL`."""
