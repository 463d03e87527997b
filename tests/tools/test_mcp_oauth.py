"""OAuth 2.1 ``client_credentials`` for a streamable-HTTP ``[[mcp]]`` server (``[mcp.auth]``).

``tests/fixtures/mcp_oauth_server.py`` is an OAuth-protected MCP server (the SDK's
``MCPServer`` as a resource server) with a minimal authorization server on the same
port; it writes every token it issues to a file. The client authorizes through the
SDK's own OAuth support; tokens are stored 0600 in a 0700 folder, reused by the next
load, and never appear in a run, a log line or an error message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import ROOT

from toolproof import load_toolset, record_session
from toolproof.errors import ConfigError
from toolproof.sources.mcp.oauth import McpAuth, OAuthSetupError, oauth_provider
from toolproof.tools.resources import MCP_SERVERS

SERVER = ROOT / "tests" / "fixtures" / "mcp_oauth_server.py"
SECRET = "s3cret-client-secret-4242"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int) -> None:
    """Return once something listens on 127.0.0.1:``port`` (up to 15 s)."""
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The fixture server's port and the file of the tokens it issued."""
    port, issued = free_port(), tmp_path / "issued.txt"
    issued.touch()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port), str(issued)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield port, issued
    finally:
        process.terminate()
        process.wait(timeout=10)


def write(tmp_path: Path, port: int, secret_env: str = "GUARDED_SECRET") -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "g"\nurl = "http://127.0.0.1:{port}/mcp"\n'
        f'[mcp.auth]\nclient_id = "toolproof-test"\nclient_secret_env = "{secret_env}"\n'
        f'issuer = "http://127.0.0.1:{port}"\ntoken_file = "tokens/g.json"\n',
        encoding="utf-8",
    )
    return config


def test_client_credentials_authorize_and_the_token_is_stored_0600_and_reused(
    tmp_path: Path, guarded: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, issued = guarded
    monkeypatch.setenv("GUARDED_SECRET", SECRET)
    config = write(tmp_path, port)

    async def call() -> Any:
        async with load_toolset(config) as toolset:
            assert toolset.quarantined == ()
            return (await toolset["g_whoami"].call({})).value

    assert asyncio.run(call()) == {"result": "a client with a valid token"}
    [token] = issued.read_text(encoding="utf-8").split()
    stored = tmp_path / "tokens" / "g.json"
    assert stored.stat().st_mode & 0o777 == 0o600
    assert stored.parent.stat().st_mode & 0o777 == 0o700
    assert json.loads(stored.read_text(encoding="utf-8"))["tokens"]["access_token"] == token
    assert asyncio.run(call()) == {"result": "a client with a valid token"}
    assert issued.read_text(encoding="utf-8").split() == [token]  # the stored one, reused


def test_a_stored_token_the_server_no_longer_accepts_is_replaced(
    tmp_path: Path, guarded: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # an expired or revoked token: the server answers 401 and the client authorizes again
    port, issued = guarded
    monkeypatch.setenv("GUARDED_SECRET", SECRET)
    stored = tmp_path / "tokens" / "g.json"
    stored.parent.mkdir(mode=0o700)
    stored.write_text(json.dumps({"tokens": {"access_token": "tok-revoked"}}), encoding="utf-8")
    stored.chmod(0o600)

    async def call() -> Any:
        async with load_toolset(write(tmp_path, port)) as toolset:
            return (await toolset["g_whoami"].call({})).value

    assert asyncio.run(call()) == {"result": "a client with a valid token"}
    [token] = issued.read_text(encoding="utf-8").split()
    assert json.loads(stored.read_text(encoding="utf-8"))["tokens"]["access_token"] == token
    assert stored.stat().st_mode & 0o777 == 0o600


def test_a_missing_secret_or_a_wrong_one_quarantines_the_server_naming_why(
    tmp_path: Path, guarded: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, _ = guarded
    monkeypatch.delenv("NOT_SET_SECRET", raising=False)

    async def rules(config: Path) -> list[str]:
        async with load_toolset(config) as toolset:
            return [item.rule for item in toolset.quarantined]

    assert asyncio.run(rules(write(tmp_path, port, "NOT_SET_SECRET"))) == [
        "MCP server 'g': auth.client_secret_env: the environment variable 'NOT_SET_SECRET' "
        "is not set (rule: the client secret comes from the environment)"
    ]
    monkeypatch.setenv("GUARDED_SECRET", "wrong-" + SECRET)
    assert asyncio.run(rules(write(tmp_path, port))) == [
        f"MCP server 'g': cannot connect to http://127.0.0.1:{port}/mcp: OAuthTokenError: "
        'Token exchange failed (401): {"error":"invalid_client"}'
    ]


def test_auth_applies_to_streamable_http_servers_only(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[mcp]]\nname = "s"\ncommand = "true"\n'
        '[mcp.auth]\nclient_id = "c"\nclient_secret_env = "S"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as refused:
        asyncio.run(load_toolset(config).__aenter__())
    assert "'auth' applies to streamable-HTTP servers ('url'), not 'command'" in str(refused.value)


def test_no_token_or_secret_reaches_a_run_a_log_or_an_error(
    tmp_path: Path,
    guarded: tuple[int, Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    port, issued = guarded
    monkeypatch.setenv("GUARDED_SECRET", SECRET)
    caplog.set_level(logging.DEBUG)  # every logger, every level
    root = tmp_path / "artifacts"
    said: list[str] = []

    async def main() -> None:
        async with record_session(write(tmp_path, port), root=root, task="who") as session:
            said.append(json.dumps((await session.call("g_whoami", {})).value))
            refused = await session.call("g_nobody", {})
            assert refused.failure is not None
            said.append(refused.failure.message)
            said.append(json.dumps(session.toolset["g_whoami"].spec.model_dump(mode="json")))

    asyncio.run(main())
    monkeypatch.setenv("GUARDED_SECRET", "wrong-" + SECRET)

    async def wrong() -> None:
        async with load_toolset(write(tmp_path, port)) as toolset:
            said.extend(item.rule for item in toolset.quarantined)
            said.append(json.dumps(toolset.resources[MCP_SERVERS], default=str))

    asyncio.run(wrong())
    tokens = issued.read_text(encoding="utf-8").split()
    assert len(tokens) == 1
    secrets = [*tokens, SECRET]
    written = [path for path in root.rglob("*") if path.is_file()]
    assert written  # the run was recorded
    for path in written:
        data = path.read_bytes()
        assert not [s for s in secrets if s.encode() in data], path
    assert not [s for s in secrets if s in caplog.text]
    assert not [s for s in secrets if any(s in text for text in said)]
    assert "tok-" not in os.environ.get("GUARDED_SECRET", "")


def test_a_token_file_that_is_a_directory_or_a_bad_issuer_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUARDED_SECRET", SECRET)
    url = "http://127.0.0.1:9/mcp"
    folder = McpAuth("c", "GUARDED_SECRET", token_file=str(tmp_path))
    with pytest.raises(OAuthSetupError) as directory:
        oauth_provider(folder, url)
    assert str(directory.value) == (
        f"auth.token_file: {tmp_path} is a directory (rule: the token file is a file, "
        "relative to the toml file; its folder is made when missing)"
    )
    issuer = McpAuth("c", "GUARDED_SECRET", str(tmp_path / "t.json"), issuer="not a url")
    with pytest.raises(OAuthSetupError) as bad:
        oauth_provider(issuer, url)
    assert str(bad.value) == (
        "auth.issuer: issuer must be the authorization server's http(s) issuer URL, got 'not a url'"
    )
    assert not (tmp_path / "t.json").exists()


def test_client_credentials_without_an_issuer_warn_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GUARDED_SECRET", SECRET)
    auth = McpAuth("c", "GUARDED_SECRET", str(tmp_path / "t.json"), server="m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the SDK's own deprecation warning is not raised
        oauth_provider(auth, "http://127.0.0.1:9/mcp")
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "toolproof.mcp",
            "WARNING",
            "MCP server 'm': auth.issuer is not set: the server decides which authorization "
            "server receives the client credentials (set issuer so they go only there)",
        )
    ]
