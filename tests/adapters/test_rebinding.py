"""DNS-rebinding protection of both HTTP servers, on real uvicorn servers on 127.0.0.x and ::1.

A forged ``Host`` is a 421 and a forged ``Origin`` a 403 on every route of
``serve-api --no-auth`` and of ``serve --http`` (the MCP streamable-HTTP endpoint),
and nothing runs: no run directory is created, no tool body writes its marker.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from serve_helpers import spawn

from toolproof.adapters.http.rebinding import loopback_address, loopback_names
from toolproof.adapters.http.tokens import is_loopback

TOOLS = '''
import os
import pathlib

import toolproof


@toolproof.tool
def touch(name: str) -> str:
    """Leave a marker file: proof that the body ran."""
    pathlib.Path(os.environ["TP_MARKER_DIR"], name).write_text("ran", encoding="utf-8")
    return "ran"
'''


def free_port_on(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def make_root(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    markers = tmp_path / "markers"
    root.mkdir()
    markers.mkdir()
    (root / "tp_rebind_tools.py").write_text(TOOLS, encoding="utf-8")
    (root / "toolproof.toml").write_text('[[python]]\nmodule = "tp_rebind_tools"\n', "utf-8")
    return root, markers


def spec(marker: str) -> dict[str, Any]:
    return {
        "spec": {
            "task": "touch",
            "toolset": "toolproof.toml",
            "policy": "audit",
            "steps": [{"id": "t", "tool": "touch", "arguments": {"name": marker}}],
        }
    }


FORGED_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1:{port}", "{host}:1", ""]
"""Foreign names, another loopback address than the bound one, the wrong port, no name."""
FORGED_ORIGINS = [
    "http://evil.example:{port}",
    "null",
    "https://{host}:{port}",
    "http://{host}:1",
    "http://127.0.0.3:{port}",
]

API_ROUTES = [
    ("GET", "/v1/health", None),
    ("GET", "/v1/runs", None),
    ("POST", "/v1/runs", "spec"),
    ("GET", "/v1/runs/run_" + "0" * 64, None),
    ("GET", "/v1/runs/run_" + "0" * 64 + "/trace", None),
    ("GET", "/v1/runs/run_" + "0" * 64 + "/files/trace.jsonl", None),
    ("POST", "/v1/runs/run_" + "0" * 64 + "/verify", None),
    ("POST", "/v1/runs/run_" + "0" * 64 + "/replay", None),
    ("GET", "/v1/runs/run_" + "0" * 64 + "/attestations", None),
    ("GET", "/openapi.json", None),
    ("GET", "/docs", None),
]


@pytest.fixture(scope="module", params=["127.0.0.2", "0:0:0:0:0:0:0:1"])
def no_auth_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int, Path, Path]]:
    host: str = request.param
    root, markers = make_root(tmp_path_factory.mktemp("api"))
    port = free_port_on(host)
    args = ["serve-api", "--root", str(root), "--host", host, "--port", str(port), "--no-auth"]
    with spawn(args, port, env={"TP_MARKER_DIR": str(markers)}, host=host):
        yield host, port, root, markers


def send(host: str, port: int, method: str, path: str, headers: dict[str, str], body: Any) -> Any:
    """Send to the server at host:port, whatever the Host header says (httpx sets it)."""
    with httpx.Client(timeout=60) as client:
        request = client.build_request(
            method, f"http://{url_host(host)}:{port}{path}", json=body, headers=headers
        )
        if "Host" in headers:
            request.headers["Host"] = headers["Host"]
        return client.send(request)


@pytest.mark.parametrize(("method", "path", "body"), API_ROUTES)
@pytest.mark.parametrize("forged", FORGED_HOSTS)
def test_serve_api_no_auth_refuses_a_forged_host_on_every_route(
    no_auth_api: tuple[str, int, Path, Path], method: str, path: str, body: Any, forged: str
) -> None:
    host, port, root, markers = no_auth_api
    value = forged.format(host=url_host(host), port=port)
    answer = send(host, port, method, path, {"Host": value}, spec("api-host") if body else None)
    bound = f"{url_host(str(loopback_address(host)))}:{port}"
    shown = f"{bound}, localhost:{port}" if host != "127.0.0.2" else bound
    assert (answer.status_code, answer.json()) == (
        421,
        {
            "status": 421,
            "error": "host-not-allowed",
            "message": f"Host {value!r} is not a name this server is bound to ({shown}): "
            "refused as a possible DNS-rebinding attack",
            "fields": {},
        },
    )
    assert not (root / "runs").exists()
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize(("method", "path", "body"), API_ROUTES)
@pytest.mark.parametrize("forged", FORGED_ORIGINS)
def test_serve_api_no_auth_refuses_a_forged_origin_on_every_route(
    no_auth_api: tuple[str, int, Path, Path], method: str, path: str, body: Any, forged: str
) -> None:
    host, port, root, markers = no_auth_api
    value = forged.format(host=url_host(host), port=port)
    answer = send(host, port, method, path, {"Origin": value}, spec("api-origin") if body else None)
    assert (answer.status_code, answer.json()["error"]) == (403, "origin-not-allowed")
    assert answer.json()["message"].startswith(f"Origin {value!r} is not this server (http://")
    assert not (root / "runs").exists()
    assert list(markers.iterdir()) == []


def test_serve_api_no_auth_serves_its_own_names(no_auth_api: tuple[str, int, Path, Path]) -> None:
    host, port, _root, _markers = no_auth_api
    names = [f"{url_host(host)}:{port}", f"{url_host(str(loopback_address(host)))}:{port}"]
    if host != "127.0.0.2":
        names.append(f"localhost:{port}")
    for name in names:
        answer = send(
            host, port, "GET", "/v1/health", {"Host": name, "Origin": f"http://{name}"}, None
        )
        assert answer.status_code == 200, (name, answer.text)


def test_serve_api_no_auth_creates_a_run_when_host_and_origin_are_its_own(
    tmp_path: Path,
) -> None:
    root, markers = make_root(tmp_path)
    host = "127.0.0.2"
    port = free_port_on(host)
    args = ["serve-api", "--root", str(root), "--host", host, "--port", str(port), "--no-auth"]
    with spawn(args, port, env={"TP_MARKER_DIR": str(markers)}, host=host):
        answer = send(
            host, port, "POST", "/v1/runs", {"Origin": f"http://{host}:{port}"}, spec("good")
        )
    assert answer.status_code == 201, answer.text
    assert (markers / "good").read_text(encoding="utf-8") == "ran"


MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "rebinding-test", "version": "0"},
    },
}


def touch_call(marker: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "touch", "arguments": {"name": marker}},
    }


@pytest.fixture(scope="module", params=["127.0.0.2", "0:0:0:0:0:0:0:1"])
def mcp_http(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int, Path, str]]:
    """``toolproof serve --http`` on a loopback address without a token, and one session."""
    host: str = request.param
    root, markers = make_root(tmp_path_factory.mktemp("mcp"))
    port = free_port_on(host)
    address = f"{url_host(host)}:{port}"
    args = ["serve", "--config", str(root / "toolproof.toml"), "--http", address]
    env = {"TP_MARKER_DIR": str(markers), "TOOLPROOF_MCP_TOKEN": ""}
    with spawn(args, port, env=env, host=host):
        answer = send(host, port, "POST", "/mcp", MCP_HEADERS, INITIALIZE)
        assert answer.status_code == 200, answer.text
        session = answer.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        headers = {**MCP_HEADERS, "MCP-Session-Id": session}
        assert send(host, port, "POST", "/mcp", headers, done).status_code == 202
        yield host, port, markers, session


@pytest.mark.parametrize("kind", ["initialize", "tools/call", "get", "delete"])
@pytest.mark.parametrize("forged", FORGED_HOSTS)
def test_mcp_http_refuses_a_forged_host_and_runs_no_tool(
    mcp_http: tuple[str, int, Path, str], kind: str, forged: str
) -> None:
    host, port, markers, session = mcp_http
    value = forged.format(host=url_host(host), port=port)
    headers = {**MCP_HEADERS, "MCP-Session-Id": session, "Host": value}
    method, body = {
        "initialize": ("POST", INITIALIZE),
        "tools/call": ("POST", touch_call("mcp-host")),
        "get": ("GET", None),
        "delete": ("DELETE", None),
    }[kind]
    answer = send(host, port, method, "/mcp", headers, body)
    assert (answer.status_code, answer.json()["error"]) == (421, "host-not-allowed")
    assert list(markers.iterdir()) == []


@pytest.mark.parametrize("forged", FORGED_ORIGINS)
def test_mcp_http_refuses_a_forged_origin_and_runs_no_tool(
    mcp_http: tuple[str, int, Path, str], forged: str
) -> None:
    host, port, markers, session = mcp_http
    value = forged.format(host=url_host(host), port=port)
    headers = {**MCP_HEADERS, "MCP-Session-Id": session, "Origin": value}
    answer = send(host, port, "POST", "/mcp", headers, touch_call("mcp-origin"))
    assert (answer.status_code, answer.json()["error"]) == (403, "origin-not-allowed")
    assert list(markers.iterdir()) == []


def test_mcp_http_runs_the_tool_for_its_own_origin(mcp_http: tuple[str, int, Path, str]) -> None:
    host, port, markers, session = mcp_http
    origin = f"http://{url_host(host)}:{port}"
    headers = {**MCP_HEADERS, "MCP-Session-Id": session, "Origin": origin}
    answer = send(host, port, "POST", "/mcp", headers, touch_call("mcp-good"))
    assert answer.status_code == 200, answer.text
    data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
    assert json.loads(data[-1])["result"]["content"][0]["text"] == "ran"
    assert (markers / "mcp-good").read_text(encoding="utf-8") == "ran"
    (markers / "mcp-good").unlink()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.2", "127.0.0.2"),
        ("127.255.255.254", "127.255.255.254"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("0000:0000:0000:0000:0000:0000:0000:0001", "::1"),
        ("::ffff:127.0.0.2", "127.0.0.2"),
        ("localhost", None),
        ("0.0.0.0", None),
        ("::", None),
        ("10.0.0.1", None),
        ("128.0.0.1", None),
        ("evil.example", None),
    ],
)
def test_every_spelling_of_a_loopback_address_is_normalised(
    text: str, expected: str | None
) -> None:
    address = loopback_address(text)
    assert (str(address) if address is not None else None) == expected
    assert is_loopback(text) is (expected is not None)


@given(st.integers(min_value=0, max_value=2**24 - 1), st.integers(min_value=1, max_value=65535))
def test_a_host_is_accepted_only_as_the_bound_address_and_port(low: int, port: int) -> None:
    bound = f"127.{low >> 16}.{(low >> 8) & 255}.{low & 255}"
    names = loopback_names(bound, port)
    assert names is not None
    assert names.accepts(f"{bound}:{port}", 80)
    assert names.accepts(f"{bound}", 80) is (port == 80)
    assert not names.accepts(f"{bound}:{port % 65535 + 1}", 80)
    other = f"127.{low >> 16}.{(low >> 8) & 255}.{(low + 1) & 255}"
    assert not names.accepts(f"{other}:{port}", 80)
    assert names.accepts(f"localhost:{port}", 80) is (bound == "127.0.0.1")
    assert not names.accepts(f"evil.example:{port}", 80)


def test_loopback_names_of_localhost_and_of_a_routable_address() -> None:
    names = loopback_names("localhost", 8000)
    assert names is not None
    assert names.shown() == "127.0.0.1:8000, [::1]:8000, localhost:8000"
    assert loopback_names("0.0.0.0", 8000) is None
    assert loopback_names("192.0.2.1", 8000) is None
