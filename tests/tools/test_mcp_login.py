"""OAuth 2.1 authorization code for a streamable-HTTP ``[[mcp]]`` server: ``toolproof mcp login``.

``tests/fixtures/mcp_oauth_code_server.py`` is an MCP server that is its own
authorization server, built from the SDK's server-side auth (metadata, dynamic
registration, ``/authorize`` with PKCE, ``/token`` with refresh); it approves every
authorization at once and logs what the client sent. No person is needed: the test is
the browser, following the ``/authorize`` redirect with httpx (to the CLI's loopback
listener, or straight back to the test for the Python API).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_support import ROOT
from test_mcp_oauth import free_port, wait_for_port
from typer.testing import CliRunner

from toolproof import load_toolset, record_session
from toolproof.adapters.cli.app import app
from toolproof.config import mcp_login
from toolproof.errors import ConfigError
from toolproof.sources.mcp.common import McpStartError
from toolproof.sources.mcp.oauth import McpAuth, OAuthSetupError, oauth_provider

SERVER = ROOT / "tests" / "fixtures" / "mcp_oauth_code_server.py"
SRC = ROOT / "src"


class Browser:
    """A person's browser that allows at once: follows ``/authorize`` to its redirect."""

    redirect_uri = "http://127.0.0.1:9/callback"  # never reached: the Location is read

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def authorize(self, url: str) -> str:
        self.asked.append(url)
        async with httpx.AsyncClient() as client:
            answer = await client.get(url)
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]


class Guarded:
    """The fixture server's base URL and what it logged."""

    def __init__(self, base: str, events: Path, issued: Path) -> None:
        self.base, self.events_file, self.issued_file = base, events, issued

    def events(self) -> list[dict[str, Any]]:
        lines = self.events_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def issued(self) -> list[str]:
        return self.issued_file.read_text(encoding="utf-8").split()


def start(tmp_path: Path, *extra: str) -> Iterator[Guarded]:
    port = free_port()
    events, issued = tmp_path / "events.jsonl", tmp_path / "issued.txt"
    events.touch()
    issued.touch()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port), str(events), str(issued), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield Guarded(f"http://127.0.0.1:{port}", events, issued)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Guarded]:
    yield from start(tmp_path)


def write(tmp_path: Path, base: str, auth: str = "") -> Path:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        f'[[mcp]]\nname = "g"\nurl = "{base}/mcp"\n'
        f'[mcp.auth]\ntoken_file = "tokens/g.json"\n{auth}',
        encoding="utf-8",
    )
    return config


async def whoami(config: Path) -> Any:
    async with load_toolset(config) as toolset:
        assert toolset.quarantined == ()
        return (await toolset["g_whoami"].call({})).value


def test_mcp_login_with_a_browser_then_loads_use_the_stored_token(
    tmp_path: Path, guarded: Guarded
) -> None:
    config = write(tmp_path, guarded.base)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = ["mcp", "login", "g", "--config", str(config), "--no-browser", "--json"]
    login = subprocess.Popen(
        [sys.executable, "-m", "toolproof", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert login.stderr is not None
    said = [login.stderr.readline(), login.stderr.readline()]
    assert said[0].startswith("Open this URL to authorize (waiting on http://127.0.0.1:")
    url = said[1].strip()
    assert url.startswith(f"{guarded.base}/authorize?response_type=code&client_id=")
    allowed = httpx.get(url)  # the person clicks "allow"
    assert allowed.status_code == 302
    back = httpx.get(allowed.headers["location"])  # the browser lands on the listener
    assert (back.status_code, "Logged in." in back.text) == (200, True)
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    token_file = tmp_path / "tokens" / "g.json"
    assert json.loads(out) == {
        "refreshable": True,
        "scope": "tools",
        "server": "g",
        "token_file": str(token_file),
        "tools": 2,
    }
    callback = said[0].split("waiting on ")[1].split(")")[0]
    events = guarded.events()
    assert [e["event"] for e in events] == ["register", "authorize", "token"]
    assert events[0] == {
        "event": "register",
        "client_name": "toolproof",
        "redirect_uris": [callback],
        "grant_types": ["authorization_code", "refresh_token"],
    }
    client_id = events[1]["client_id"]
    assert events[1] == {
        "event": "authorize",
        "client_id": client_id,
        "scope": "tools",
        "resource": f"{guarded.base}/mcp",  # RFC 8707
        "redirect_uri": callback,
        "has_challenge": True,  # PKCE S256 (the SDK's server refuses a request without)
    }
    assert events[2] == {
        "event": "token",
        "grant": "authorization_code",
        "resource": f"{guarded.base}/mcp",
    }
    access, refresh = guarded.issued()
    stored = json.loads(token_file.read_text(encoding="utf-8"))
    assert (stored["tokens"]["access_token"], stored["tokens"]["refresh_token"]) == (
        access,
        refresh,
    )
    assert stored["client"]["client_id"] == client_id
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert token_file.parent.stat().st_mode & 0o777 == 0o700
    assert access not in out + err and refresh not in out + err

    assert asyncio.run(whoami(config)) == {"result": "a person who logged in"}
    assert len(guarded.events()) == 3  # the stored token, nothing asked again


def test_a_load_before_any_login_names_the_command_and_asks_the_server_nothing(
    tmp_path: Path, guarded: Guarded
) -> None:
    async def rules() -> list[str]:
        async with load_toolset(write(tmp_path, guarded.base)) as toolset:
            return [item.rule for item in toolset.quarantined]

    assert asyncio.run(rules()) == [
        "MCP server 'g': auth: no token for this server yet (rule: a person authorizes once "
        "with toolproof mcp login g --config FILE; loads reuse and refresh the tokens)"
    ]
    assert guarded.events() == []


def test_an_expired_token_is_refreshed_at_load_without_asking_anyone(
    tmp_path: Path, guarded: Guarded
) -> None:
    config = write(tmp_path, guarded.base)
    browser = Browser()
    outcome = asyncio.run(mcp_login(config, "g", browser))
    assert (outcome.scope, outcome.refreshable, outcome.tools) == ("tools", True, 2)
    assert len(browser.asked) == 1
    token_file = tmp_path / "tokens" / "g.json"
    stored = json.loads(token_file.read_text(encoding="utf-8"))
    stored["expires_at"] = 1  # expired long ago (1970)
    token_file.write_text(json.dumps(stored), encoding="utf-8")

    assert asyncio.run(whoami(config)) == {"result": "a person who logged in"}
    assert guarded.events()[-1] == {
        "event": "token",
        "grant": "refresh_token",
        "resource": f"{guarded.base}/mcp",
    }
    _, _, access, refresh = guarded.issued()
    renewed = json.loads(token_file.read_text(encoding="utf-8"))
    assert (renewed["tokens"]["access_token"], renewed["tokens"]["refresh_token"]) == (
        access,
        refresh,
    )
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert len(browser.asked) == 1  # nobody was asked


def test_a_failed_login_again_keeps_the_working_tokens(
    tmp_path: Path, guarded: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    config = write(tmp_path, guarded.base)
    asyncio.run(mcp_login(config, "g", Browser()))
    token_file = tmp_path / "tokens" / "g.json"
    kept = token_file.read_bytes()
    assert set(json.loads(kept)) == {"client", "tokens", "expires_at"}
    port = free_port()
    command = ["mcp", "login", "g", "--config", str(config), "--no-browser", "--timeout", "1"]
    failed = CliRunner().invoke(app, [*command, "--port", str(port)])  # nobody opens the URL
    assert failed.exit_code == 1
    timed_out = (
        f"no authorization came back to http://127.0.0.1:{port}/callback within 1 s (rule: "
        "the browser must reach this machine's loopback address)"
    )
    assert failed.stderr.splitlines()[2:] == [f"error: MCP server 'g': login failed: {timed_out}"]
    flow = [r for r in caplog.records if r.name == "mcp.client.auth.oauth2"]
    assert [(r.getMessage(), r.exc_info) for r in flow] == [  # one line, no traceback
        (f"OAuth flow error: OAuthSetupError: {timed_out}", None)
    ]
    assert token_file.read_bytes() == kept  # the file was not touched
    assert [p.name for p in token_file.parent.iterdir()] == ["g.json"]  # no temporary left
    assert asyncio.run(whoami(config)) == {"result": "a person who logged in"}


def test_a_call_that_needs_more_scope_steps_up_through_the_authorizer(
    tmp_path: Path, guarded: Guarded, caplog: pytest.LogCaptureFixture
) -> None:
    config = write(tmp_path, guarded.base)
    browser = Browser()
    asyncio.run(mcp_login(config, "g", browser))

    async def note(authorizer: Browser | None) -> tuple[Any, str | None]:
        async with load_toolset(config, authorizer=authorizer) as toolset:
            result = await toolset["g_write_note"].call({"text": "hi"})
            return result.value, result.failure.message if result.failure else None

    # nobody to ask: the SDK's flow stops, the connection with it; the failure names why
    assert asyncio.run(note(None)) == (
        None,
        "MCP server 'g' closed the connection during tools/call: Connection closed; auth: "
        "the server asks for a new authorization (rule: a person authorizes once with "
        "toolproof mcp login g --config FILE; loads reuse and refresh the tokens)",
    )
    assert (
        "LoginRequired: auth: the server asks for a new authorization (rule: a person "
        "authorizes once with toolproof mcp login g --config FILE; loads reuse and refresh "
        "the tokens)"
    ) in caplog.text
    assert asyncio.run(note(browser)) == ({"result": "noted: hi"}, None)
    authorized = [e for e in guarded.events() if e["event"] == "authorize"]
    assert [e["scope"] for e in authorized] == ["tools", "tools notes"]  # the union
    assert authorized[1]["resource"] == f"{guarded.base}/mcp"
    stored = json.loads((tmp_path / "tokens" / "g.json").read_text(encoding="utf-8"))
    assert stored["tokens"]["scope"] == "tools notes"
    assert len(browser.asked) == 2


def test_a_redirect_naming_another_issuer_is_refused_before_any_token(
    tmp_path: Path,
) -> None:
    for guarded in start(tmp_path, "https://evil.example"):
        config = write(tmp_path, guarded.base)
        with pytest.raises(McpStartError) as refused:
            asyncio.run(mcp_login(config, "g", Browser()))
        assert str(refused.value) == (
            f"cannot connect to {guarded.base}/mcp: OAuthFlowError: Authorization response "
            f"iss mismatch: https://evil.example != {guarded.base}"
        )
        assert [e["event"] for e in guarded.events()] == ["register", "authorize"]
        assert guarded.issued() == []


def test_no_token_reaches_a_run_a_log_a_span_or_a_message(
    tmp_path: Path, guarded: Guarded, caplog: pytest.LogCaptureFixture, exporter: Any
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    config = write(tmp_path, guarded.base)
    said: list[str] = [repr(asyncio.run(mcp_login(config, "g", Browser())))]
    root = tmp_path / "artifacts"

    async def main() -> None:
        async with record_session(config, root=root, task="who") as session:
            said.append(json.dumps((await session.call("g_whoami", {})).value))
            refused = await session.call("g_nobody", {})
            assert refused.failure is not None
            said.append(refused.failure.message)

    asyncio.run(main())
    tokens = guarded.issued()
    assert len(tokens) == 2
    written = [path for path in root.rglob("*") if path.is_file()]
    assert written
    for path in written:
        assert not [t for t in tokens if t.encode() in path.read_bytes()], path
    assert not [t for t in tokens if t in caplog.text]
    assert not [t for t in tokens if any(t in text for text in said)]
    spans = exporter.get_finished_spans()
    assert "tools/call whoami" in [span.name for span in spans]  # the call was traced
    traced = json.dumps(
        [
            [span.name, dict(span.attributes or {})]
            + [[event.name, dict(event.attributes or {})] for event in span.events]
            for span in spans
        ],
        default=str,
    )
    assert not [t for t in tokens if t in traced]


def test_login_refusals_name_the_server_and_the_rule(tmp_path: Path) -> None:
    config = tmp_path / "toolproof.toml"
    config.write_text(
        '[[mcp]]\nname = "s"\ncommand = "true"\n[[mcp]]\nname = "h"\nurl = "http://127.0.0.1:9/mcp"\n'
        '[[mcp]]\nname = "m"\nurl = "http://127.0.0.1:9/mcp"\n'
        '[mcp.auth]\nclient_id = "c"\nclient_secret_env = "S"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as stdio:
        asyncio.run(mcp_login(config, "s", Browser()))
    assert str(stdio.value) == (
        f"{config}: mcp[0]: s is a stdio server: OAuth applies to HTTP servers only"
    )
    with pytest.raises(ConfigError) as machine:
        asyncio.run(mcp_login(config, "m", Browser()))
    assert str(machine.value) == (
        f"{config}: mcp[2].auth: m uses client credentials: no login needed (loads get the token)"
    )
    failed = CliRunner().invoke(app, ["mcp", "login", "m", "--config", str(config), "--json"])
    assert failed.exit_code == 1
    assert json.loads(failed.stdout) == {
        "server": "m",
        "error": f"{config}: mcp[2].auth: m uses client credentials: no login needed (loads "
        "get the token)",
    }
    with pytest.raises(ConfigError) as missing:
        asyncio.run(mcp_login(config, "x", Browser()))
    assert "no [[mcp]] named 'x' (servers: s, h, m)" in str(missing.value)
    with pytest.raises(ConfigError) as plain:
        asyncio.run(mcp_login(config, "h", Browser()))
    assert (
        "mcp[1].auth: server 'h' has no [mcp.auth] (rule: mcp login is for streamable-HTTP "
        "servers ('url') with an auth table)"
    ) in str(plain.value)


def test_auth_table_rules(tmp_path: Path) -> None:
    def refusal(auth: str) -> str:
        with pytest.raises(ConfigError) as refused:
            asyncio.run(load_toolset(write(tmp_path, "http://127.0.0.1:9", auth)).__aenter__())
        return str(refused.value)

    assert (
        "client_credentials needs 'client_id' and 'client_secret_env' (a machine client has "
        "an id and a secret)"
    ) in refusal('grant = "client_credentials"\nclient_id = "c"\n')
    assert "'redirect_port' applies to grant = 'authorization_code'" in refusal(
        'client_id = "c"\nclient_secret_env = "S"\nredirect_port = 8765\n'
    )
    assert "'scope' applies to grant = 'client_credentials'" in refusal('scope = "tools"\n')
    cimd = McpAuth(token_file=str(tmp_path / "t.json"), client_metadata_url="http://x/c.json")
    with pytest.raises(OAuthSetupError) as bad:
        oauth_provider(cimd, "http://127.0.0.1:9/mcp")
    assert str(bad.value) == (
        "auth.client_metadata_url: client_metadata_url must be a valid HTTPS URL with a "
        "non-root pathname, got: http://x/c.json"
    )


def test_auth_values_are_checked_when_the_file_loads(tmp_path: Path) -> None:
    def refusal(entry: str) -> str:
        config = tmp_path / "toolproof.toml"
        config.write_text(
            f'[[mcp]]\nname = "g"\nurl = "http://127.0.0.1:9/mcp"\n{entry}', encoding="utf-8"
        )
        with pytest.raises(ConfigError) as refused:
            asyncio.run(load_toolset(config).__aenter__())
        return str(refused.value).split(": ", 1)[1]

    path = "'token_file' must be a file path (not empty, no NUL character), got "
    assert refusal('[mcp.auth]\ntoken_file = "a\\u0000b"\n') == f"mcp[0].auth: {path}'a\\x00b'"
    assert refusal('[mcp.auth]\ntoken_file = ""\n') == f"mcp[0].auth: {path}''"
    (tmp_path / "tokens").mkdir()
    assert refusal('[mcp.auth]\ntoken_file = "tokens"\n') == (
        f"mcp[0].auth: 'token_file' {tmp_path.resolve() / 'tokens'} is a directory (rule: the "
        "token file is a file, relative to the toml file; its folder is made when missing)"
    )
    metadata = "'client_metadata_url' must be an https URL with a path (the client's metadata "
    for url in ("http://e.com/c.json", "https://e.com"):
        assert refusal(f'[mcp.auth]\nclient_metadata_url = "{url}"\n') == (
            f"mcp[0].auth: {metadata}document), got '{url}'"
        )
    assert refusal('[mcp.auth]\nissuer = "not a url"\n') == (
        "mcp[0].auth: 'issuer' must be the authorization server's http(s) issuer URL, "
        "got 'not a url'"
    )
    for port in ('"8000"', "true"):
        assert refusal(f"[mcp.auth]\nredirect_port = {port}\n") == (
            "mcp[0].auth.redirect_port: Input should be a valid integer"
        )
    assert refusal('headers = {authorization = "Bearer x"}\n[mcp.auth]\n') == (
        "mcp[0]: 'headers' Authorization and [mcp.auth] conflict (the auth table sets the "
        "Authorization header: give one of them)"
    )
    for auth in ('auth = "yes"\n', "[[mcp.auth]]\n"):
        assert refusal(auth) == "mcp[0].auth: must be a table ([mcp.auth])"


def test_a_corrupt_token_file_says_log_in_again(tmp_path: Path) -> None:
    config = write(tmp_path, "http://127.0.0.1:9")
    token_file = tmp_path / "tokens" / "g.json"
    token_file.parent.mkdir()

    async def rules() -> list[str]:
        async with load_toolset(config) as toolset:
            return [item.rule for item in toolset.quarantined]

    hint = (
        "(rule: a person authorizes once with toolproof mcp login g --config FILE; loads "
        "reuse and refresh the tokens)"
    )
    for content, why in ((b"{garbage", "not JSON: line 1"), (b"\xff\xfe\x00", "not UTF-8 text")):
        token_file.write_bytes(content)
        assert asyncio.run(rules()) == [
            f"MCP server 'g': auth: token file {token_file} is not valid ({why}): log in "
            f"again {hint}"
        ]
