"""Spawn real ``toolproof`` server processes for the serve tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "serve"
SERVE_CONFIG = FIXTURES / "toolproof.toml"
SERVE_TOOLS = [
    "add",
    "add_args",
    "add_retry",
    "echo",
    "explode",
    "flaky",
    "flaky_retry",
    "segment",
    "segment_project",
    "segments",
    "whoami",
    "whoami_process",
]
"""Every tool and variant the fixture binds, sorted."""
TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(
    process: subprocess.Popen[bytes], port: int, timeout: float = 30.0, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise AssertionError(f"server exited with {process.returncode}: {err}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError(f"server did not listen on {host}:{port} within {timeout} s")


@contextmanager
def spawn(
    args: list[str], port: int, env: dict[str, str] | None = None, host: str = "127.0.0.1"
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``toolproof ARGS`` until it listens on ``host:port``; SIGTERM it on exit."""
    process = subprocess.Popen(
        [*TOOLPROOF, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        wait_listening(process, port, host=host)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
