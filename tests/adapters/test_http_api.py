"""The runs HTTP API over a real uvicorn server on 127.0.0.1, driven by httpx."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_support import Ran, toolproof
from serve_helpers import free_port, spawn

from toolproof.adapters.http.settings import is_loopback

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("artifacts")
    port = free_port()
    args = ["serve-api", "--root", str(root), "--port", str(port), "--max-body-bytes", "65536"]
    with spawn(args, port, env={"TOOLPROOF_API_TOKEN": TOKEN}):
        yield f"http://127.0.0.1:{port}", root


def test_health_needs_no_token(api: tuple[str, Path]) -> None:
    answer = httpx.get(f"{api[0]}/v1/health")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok", "version": "0.1.0"})


def test_a_missing_token_is_401_with_a_bearer_challenge(api: tuple[str, Path]) -> None:
    answer = httpx.get(f"{api[0]}/v1/runs")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json() == {
        "status": 401,
        "error": "unauthorized",
        "message": "missing bearer token (Authorization: Bearer ...)",
        "fields": {},
    }


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}x", "Bearer wrong", f"Basic {TOKEN}", f"bearer {TOKEN[:-1]}"],
)
def test_a_wrong_token_is_401(api: tuple[str, Path], header: str) -> None:
    answer = httpx.get(f"{api[0]}/v1/runs", headers={"Authorization": header})
    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthorized"


def test_the_right_token_lists_an_empty_root(api: tuple[str, Path]) -> None:
    answer = httpx.get(f"{api[0]}/v1/runs", headers=AUTH)
    assert (answer.status_code, answer.json()) == (200, {"runs": [], "next_cursor": None})


@pytest.mark.parametrize(
    "raw_path",
    [
        b"/v1/runs/..%2F..%2Fetc%2Fpasswd",
        b"/v1/runs/../../etc/passwd",
        b"/v1/runs/run_..%2F..%2F" + b"0" * 58,
        b"/v1/runs/%2E%2E",
        b"/v1/runs/run_" + b"A" * 64,
        b"/v1/runs/..%2F..%2Fetc%2Fpasswd/trace",
    ],
)
def test_a_traversing_or_malformed_run_id_is_404_or_422(
    api: tuple[str, Path], raw_path: bytes
) -> None:
    with httpx.Client() as client:
        request = client.build_request("GET", f"{api[0]}/v1/runs", headers=AUTH)
        request.url = request.url.copy_with(raw_path=raw_path)
        answer = client.send(request)
    assert answer.status_code in (404, 422), answer.text
    assert "root:" not in answer.text


def test_a_run_id_that_is_well_formed_but_absent_is_404(api: tuple[str, Path]) -> None:
    run_id = "run_" + "0" * 64
    answer = httpx.get(f"{api[0]}/v1/runs/{run_id}", headers=AUTH)
    assert answer.status_code == 404
    assert answer.json()["message"] == f"no run {run_id!r} under the artifact root"


def test_a_run_directory_symlinked_outside_the_root_is_not_served(
    api: tuple[str, Path], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "spec.json").write_text('{"task": "secret"}', encoding="utf-8")
    run_id = "run_" + "1" * 64
    (api[1] / "runs").mkdir(exist_ok=True)
    (api[1] / "runs" / run_id).symlink_to(outside)
    try:
        answer = httpx.get(f"{api[0]}/v1/runs/{run_id}", headers=AUTH)
        listing = httpx.get(f"{api[0]}/v1/runs", headers=AUTH)
    finally:
        (api[1] / "runs" / run_id).unlink()
    assert answer.status_code == 404
    assert listing.json()["runs"] == []


def test_an_oversized_body_is_413_before_it_is_read(api: tuple[str, Path]) -> None:
    answer = httpx.post(f"{api[0]}/v1/runs", headers=AUTH, content=b"{" + b" " * 70000 + b"}")
    assert answer.status_code == 413
    assert answer.json() == {
        "status": 413,
        "error": "body-too-large",
        "message": "the request body is 70002 bytes; the limit is 65536 bytes",
        "fields": {},
    }


def test_an_oversized_chunked_body_is_413(api: tuple[str, Path]) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b" " * 8192

    answer = httpx.post(
        f"{api[0]}/v1/runs",
        headers={**AUTH, "Content-Type": "application/json"},
        content=chunks(),
    )
    assert answer.status_code == 413
    assert answer.json()["message"] == (
        "the request body is more than 65536 bytes; the limit is 65536 bytes"
    )


def test_an_invalid_body_is_a_422_problem_naming_the_field(api: tuple[str, Path]) -> None:
    answer = httpx.post(f"{api[0]}/v1/runs", headers=AUTH, json={"spec": {"task": "t"}, "x": 1})
    assert answer.status_code == 422
    body = answer.json()
    assert (body["error"], body["message"]) == (
        "invalid-request",
        "body.x: Extra inputs are not permitted",
    )
    unknown = httpx.post(
        f"{api[0]}/v1/runs", headers=AUTH, json={"spec": {"task": "t", "stepz": []}}
    )
    assert unknown.json()["message"] == "body.spec.stepz: Extra inputs are not permitted"


@pytest.mark.parametrize(
    "body", [b"not json at all", b"{", b"\xff\xfe", b"{" + b" " * 70000 + b"}"]
)
def test_a_body_without_a_token_is_401_before_it_is_parsed(
    api: tuple[str, Path], body: bytes
) -> None:
    answer = httpx.post(
        f"{api[0]}/v1/runs", content=body, headers={"Content-Type": "application/json"}
    )
    assert (answer.status_code, answer.headers["www-authenticate"]) == (401, "Bearer")
    assert answer.json() == {
        "status": 401,
        "error": "unauthorized",
        "message": "missing bearer token (Authorization: Bearer ...)",
        "fields": {},
    }


def test_a_non_json_body_with_the_token_is_400(api: tuple[str, Path]) -> None:
    answer = httpx.post(
        f"{api[0]}/v1/runs",
        content=b"not json",
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert answer.status_code in (400, 422)


def test_openapi_is_published_with_every_operation(api: tuple[str, Path]) -> None:
    document = httpx.get(f"{api[0]}/openapi.json").json()
    operations = sorted(
        (method.upper(), path) for path, item in document["paths"].items() for method in item
    )
    assert operations == [
        ("GET", "/v1/approvals"),
        ("GET", "/v1/approvals/{request_id}"),
        ("GET", "/v1/diff"),
        ("GET", "/v1/health"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/runs/{run_id}"),
        ("GET", "/v1/runs/{run_id}/attestations"),
        ("GET", "/v1/runs/{run_id}/files/{path}"),
        ("GET", "/v1/runs/{run_id}/summary"),
        ("GET", "/v1/runs/{run_id}/trace"),
        ("POST", "/v1/approvals/{request_id}"),
        ("POST", "/v1/runs"),
        ("POST", "/v1/runs/{run_id}/replay"),
        ("POST", "/v1/runs/{run_id}/verify"),
    ]
    assert document["components"]["securitySchemes"] == {
        "HTTPBearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "The API token (`TOOLPROOF_API_TOKEN`).",
        }
    }


def _serve_api(*args: str, env: dict[str, str] | None = None) -> Ran:
    """``toolproof serve-api ARGS`` in process; ``env``, when given, is the whole environment."""
    unset: dict[str, str | None] = dict.fromkeys(os.environ.keys() - (env or os.environ).keys())
    return toolproof("serve-api", *args, env={**unset, **(env or {})})


def test_no_auth_is_refused_off_loopback(tmp_path: Path) -> None:
    done = _serve_api("--root", str(tmp_path), "--host", "0.0.0.0", "--no-auth")
    assert done.returncode == 1
    assert (
        "--no-auth is only allowed on a loopback address (127.0.0.0/8 or ::1), not '0.0.0.0'"
    ) in done.stderr


def test_serving_without_any_token_is_refused(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TOOLPROOF_API_TOKEN"}
    done = _serve_api("--root", str(tmp_path), env=env)
    assert done.returncode == 1
    assert "the HTTP API needs a bearer token" in done.stderr


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    done = _serve_api("--root", str(tmp_path), "--token", "short")
    assert done.returncode == 1
    assert "the bearer token from --token is 5 characters long; use at least 16" in done.stderr


@pytest.mark.parametrize(
    ("how", "value", "message"),
    [
        (
            "env",
            " " * 20,
            "the bearer token from $TOOLPROOF_API_TOKEN is blank (20 whitespace characters)",
        ),
        ("env", "\t\t\t", "the bearer token from $TOOLPROOF_API_TOKEN is blank (3 whitespace"),
        ("file", " " * 20 + "\n", "the bearer token from --token-file"),
        ("file", "\n", "is blank (0 whitespace characters)"),
        ("option", " " * 24, "the bearer token from --token is blank (24 whitespace characters)"),
        (
            "env",
            "token with spaces inside it",
            "the bearer token from $TOOLPROOF_API_TOKEN holds a character a Bearer header "
            "cannot carry",
        ),
    ],
)
def test_a_blank_or_unsendable_token_is_refused(
    tmp_path: Path, how: str, value: str, message: str
) -> None:
    env = {key: val for key, val in os.environ.items() if key != "TOOLPROOF_API_TOKEN"}
    args = ["--root", str(tmp_path), "--port", str(free_port())]
    if how == "env":
        env["TOOLPROOF_API_TOKEN"] = value
    elif how == "file":
        (tmp_path / "token").write_text(value, encoding="utf-8")
        args += ["--token-file", str(tmp_path / "token")]
    else:
        args += ["--token", value]
    done = _serve_api(*args, env=env)
    assert done.returncode == 1, done.stderr
    assert message in done.stderr
    assert done.stderr.count("\n") <= 3  # one error, wrapped at most


def test_no_auth_on_loopback_serves_without_a_token(tmp_path: Path) -> None:
    port = free_port()
    args = ["serve-api", "--root", str(tmp_path), "--port", str(port), "--no-auth"]
    with spawn(args, port) as process:
        answer = httpx.get(f"http://127.0.0.1:{port}/v1/runs")
    assert (answer.status_code, answer.json()) == (200, {"runs": [], "next_cursor": None})
    assert process.returncode == 0  # SIGTERM: a graceful shutdown


def test_a_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve_api("--root", str(tmp_path), "--no-auth", "--port", str(port))
    assert done.returncode == 1
    assert f"error: cannot serve on 127.0.0.1:{port}: the address is in use or not available" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("localhost", False),
        ("10.0.0.1", False),
    ],
)
def test_only_loopback_addresses_allow_no_auth(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
