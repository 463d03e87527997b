"""Helpers for the MCP tests: the process table, the fixture server, the npm server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture_server.py"
EVERYTHING_ENV = "TOOLPROOF_MCP_EVERYTHING"
EVERYTHING_DEFAULT = ROOT / ".ci-cache" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])  # state, ppid


def descendants(pid: int | None = None) -> set[int]:
    """Every live (not zombie) process under ``pid`` (default: this process), from /proc."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] != "Z":
                parents[int(entry.name)] = stat[1]
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {child for child, parent in parents.items() if parent in frontier}
        frontier = children - found
        found |= children
    return found


def alive(pids: set[int]) -> set[int]:
    """The pids of ``pids`` that still exist and are not zombies."""
    return {pid for pid in pids if (stat := _stat(pid)) is not None and stat[0] != "Z"}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def servers(pids: set[int]) -> set[int]:
    """The MCP servers among ``pids``: without the exit watchers each stdio server runs under."""
    return {pid for pid in pids if "toolproof-mcp-" not in cmdline(pid)}


def fixture_entry(name: str, *flags: str, **keys: object) -> str:
    """A ``[[mcp]]`` TOML table launching the fixture server with ``flags``."""
    args = [str(FIXTURE), *flags]
    lines = [
        "[[mcp]]",
        f'name = "{name}"',
        f"command = {sys.executable!r}".replace("'", '"'),
        "args = [" + ", ".join(f'"{arg}"' for arg in args) + "]",
    ]
    for key, value in keys.items():
        rendered = f'"{value}"' if isinstance(value, str) else str(value).lower()
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


def everything_bin() -> Path:
    """The ``mcp-server-everything`` launcher (npm); fails under CI=true when missing."""
    path = Path(os.environ.get(EVERYTHING_ENV) or EVERYTHING_DEFAULT)
    if not path.exists():
        message = (
            f"@modelcontextprotocol/server-everything not installed at {path} "
            f"(run .ci/services, or set {EVERYTHING_ENV})"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


MCP1_ENV = "TOOLPROOF_MCP1_VENV"
MCP1_DEFAULT = ROOT / ".ci-cache" / "mcp1-venv"


def mcp1_venv() -> Path:
    """The venv holding ``mcp-server-time`` on the mcp 1.x SDK; fails under CI=true when missing."""
    path = Path(os.environ.get(MCP1_ENV) or MCP1_DEFAULT)
    if not (path / "bin" / "mcp-server-time").exists():
        message = f"no mcp 1.x server venv at {path} (run .ci/services, or set {MCP1_ENV})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
