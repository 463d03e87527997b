"""Helpers for the backend tests: the fixture composition root and process checks."""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from toolproof.backends import BackendRequest, ProcessPool
from toolproof.contract.tools import ToolResult

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "backends"
CONFIG = FIXTURES / "toolproof.toml"
REDIS_URL = "redis://127.0.0.1:6379/15"

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


def require_redis() -> None:
    """Skip without Redis on 127.0.0.1:6379, except under ``CI=true``, where it fails."""
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return
    except OSError as exc:
        message = f"Redis is not reachable on 127.0.0.1:6379: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: a test that needs a service fails, never skips)")
        pytest.skip(message)
