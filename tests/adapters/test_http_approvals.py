"""The HTTP approval channel: ``/v1/approvals`` over the real store a deferred gate wrote.

Each test defers a real call of ``delete_branch_approve`` (``[approvals] mode =
"defer"``), decides it through the FastAPI app of ``serve-api`` (in process, over
httpx's ASGI transport), then retries the call with its handle; the side-effect file
proves whether the body ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_support import (
    APPROVER_TOKEN,
    OTHER_TOKEN,
    RUNS_TOKEN,
    side_effects,
    write_approvers,
    write_gated_root,
)
from serve_helpers import free_port, spawn

from toolproof import ToolResult, load_toolset
from toolproof.adapters.http import ApiSettings, create_app
from toolproof.adapters.http.tokens import load_named_tokens
from toolproof.errors import InputError

ALICE = {"Authorization": f"Bearer {APPROVER_TOKEN}"}


def _defer(config: Path, arguments: dict[str, Any]) -> ToolResult:
    async def go() -> ToolResult:
        async with load_toolset(config) as toolset:
            return await toolset["delete_branch_approve"].call(arguments)

    return asyncio.run(go())


def _pending(config: Path, arguments: dict[str, Any]) -> str:
    result = _defer(config, arguments)
    assert result.failure is not None and result.failure.kind == "approval_pending"
    handle = result.failure.detail["handle"]
    assert isinstance(handle, str)
    return handle


def _settings(folder: Path, *, store: bool = True) -> ApiSettings:
    return ApiSettings(
        root=folder,
        token=RUNS_TOKEN,
        approvals_store=folder / "approvals.sqlite" if store else None,
        approvers=load_named_tokens(write_approvers(folder)),
    )


def _http(settings: ApiSettings, *requests: tuple[str, str, dict[str, Any]]) -> list[Any]:
    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=create_app(settings))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return [await client.request(m, url, **kw) for m, url, kw in requests]

    return asyncio.run(go())


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    config = write_gated_root(tmp_path)
    yield config, _pending(config, {"branch": "feature"})


def test_an_approver_lists_shows_and_approves_and_the_retry_runs_once(
    gated: tuple[Path, str],
) -> None:
    config, handle = gated
    folder = config.parent
    listed, shown, decided = _http(
        _settings(folder),
        ("GET", "/v1/approvals", {"headers": ALICE}),
        ("GET", f"/v1/approvals/{handle}", {"headers": ALICE}),
        (
            "POST",
            f"/v1/approvals/{handle}",
            {"headers": ALICE, "json": {"decision": "approve", "reason": "merged"}},
        ),
    )
    assert listed.status_code == 200, listed.text
    assert [row["id"] for row in listed.json()["approvals"]] == [handle]
    row = shown.json()
    assert (row["tool"], row["arguments"], row["status"], row["mode"]) == (
        "delete_branch_approve",
        {"branch": "feature"},
        "pending",
        "defer",
    )
    assert decided.status_code == 200, decided.text
    after = decided.json()
    assert (after["status"], after["decision"], after["who"], after["channel"]) == (
        "approved",
        "approve",
        "alice",
        "http",
    )
    assert (after["reason"], after["approved_digest"]) == ("merged", row["arguments_digest"])
    assert side_effects(folder) == []
    retried = _defer(config, {"branch": "feature", "approval_handle": handle})
    assert (retried.ok, retried.value) == (True, "deleted feature")
    again = _defer(config, {"branch": "feature", "approval_handle": handle})
    assert again.failure is not None and again.failure.kind == "approval_denied"
    assert side_effects(folder) == ["feature force=False"]
    (consumed,) = _http(_settings(folder), ("GET", f"/v1/approvals/{handle}", {"headers": ALICE}))
    assert consumed.json()["status"] == "consumed"


def test_a_denial_over_http_keeps_the_body_from_running(gated: tuple[Path, str]) -> None:
    config, handle = gated
    bob = {"Authorization": f"Bearer {OTHER_TOKEN}"}
    (denied,) = _http(
        _settings(config.parent),
        ("POST", f"/v1/approvals/{handle}", {"headers": bob, "json": {"decision": "deny"}}),
    )
    assert (denied.json()["status"], denied.json()["who"]) == ("denied", "bob")
    retried = _defer(config, {"branch": "feature", "approval_handle": handle})
    assert retried.failure is not None
    assert (retried.failure.kind, retried.failure.detail["who"]) == ("approval_denied", "bob")
    assert side_effects(config.parent) == []


def test_an_edit_over_http_runs_the_edited_arguments_only(gated: tuple[Path, str]) -> None:
    config, handle = gated
    edit = {"decision": "edit", "arguments": {"branch": "feature-old"}, "reason": "wrong one"}
    (edited,) = _http(
        _settings(config.parent),
        ("POST", f"/v1/approvals/{handle}", {"headers": ALICE, "json": edit}),
    )
    body = edited.json()
    assert (body["decision"], body["approved_arguments"]) == (
        "approve_with_edits",
        {"branch": "feature-old"},
    )
    retried = _defer(config, {"branch": "feature", "approval_handle": handle})
    assert (retried.ok, retried.value) == (True, "deleted feature-old")
    assert side_effects(config.parent) == ["feature-old force=False"]


def test_a_request_is_decided_once(gated: tuple[Path, str]) -> None:
    config, handle = gated
    url = f"/v1/approvals/{handle}"
    first, second = _http(
        _settings(config.parent),
        ("POST", url, {"headers": ALICE, "json": {"decision": "approve"}}),
        ("POST", url, {"headers": ALICE, "json": {"decision": "deny"}}),
    )
    assert first.status_code == 200
    assert (second.status_code, second.json()["error"]) == (409, "approval-decided")
    assert second.json()["message"] == (
        f"approval request {handle!r} is approved, not pending "
        "(rule: a request is decided once, before its deadline)"
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": f"Bearer {RUNS_TOKEN}"},
        {"Authorization": f"Bearer {APPROVER_TOKEN}x"},
        {"Authorization": f"Basic {APPROVER_TOKEN}"},
    ],
)
def test_without_an_approver_token_every_approval_endpoint_is_401(
    gated: tuple[Path, str], headers: dict[str, str]
) -> None:
    config, handle = gated
    answers = _http(
        _settings(config.parent),
        ("GET", "/v1/approvals", {"headers": headers}),
        ("GET", f"/v1/approvals/{handle}", {"headers": headers}),
        ("POST", f"/v1/approvals/{handle}", {"headers": headers, "json": {"decision": "approve"}}),
        ("POST", f"/v1/approvals/{handle}", {"headers": headers, "content": b"not json"}),
    )
    for answer in answers:
        assert (answer.status_code, answer.headers["www-authenticate"]) == (401, "Bearer")
        body = answer.json()
        assert (body["status"], body["error"], body["fields"]) == (401, "unauthorized", {})
        assert body["message"] in (
            "missing bearer token (Authorization: Bearer ...)",
            "wrong bearer token",
        )
    (shown,) = _http(
        _settings(config.parent), ("GET", f"/v1/approvals/{handle}", {"headers": ALICE})
    )
    assert shown.json()["status"] == "pending"
    assert side_effects(config.parent) == []


def test_the_runs_token_still_serves_the_runs_api_but_not_approvals(tmp_path: Path) -> None:
    write_gated_root(tmp_path)
    runs = {"Authorization": f"Bearer {RUNS_TOKEN}"}
    listed, refused = _http(
        _settings(tmp_path),
        ("GET", "/v1/runs", {"headers": runs}),
        ("GET", "/v1/approvals", {"headers": runs}),
    )
    assert listed.status_code == 200
    assert (refused.status_code, refused.json()["message"]) == (401, "wrong bearer token")


def test_bad_ids_bodies_and_a_missing_store_are_problems(gated: tuple[Path, str]) -> None:
    config, handle = gated
    unknown = "apr_" + "0" * 32
    missing, malformed, no_args, stray = _http(
        _settings(config.parent),
        ("GET", f"/v1/approvals/{unknown}", {"headers": ALICE}),
        ("GET", "/v1/approvals/apr_XYZ", {"headers": ALICE}),
        ("POST", f"/v1/approvals/{handle}", {"headers": ALICE, "json": {"decision": "edit"}}),
        (
            "POST",
            f"/v1/approvals/{handle}",
            {"headers": ALICE, "json": {"decision": "approve", "arguments": {"branch": "x"}}},
        ),
    )
    assert (missing.status_code, missing.json()["error"]) == (404, "approval-not-found")
    assert (malformed.status_code, malformed.json()["error"]) == (422, "invalid-request")
    assert (no_args.status_code, no_args.json()["message"]) == (
        422,
        "body: Value error, decision 'edit' needs the edited 'arguments'",
    )
    assert (stray.status_code, stray.json()["message"]) == (
        422,
        "body: Value error, 'arguments' go with decision 'edit', not 'approve'",
    )
    (unconfigured,) = _http(
        _settings(config.parent, store=False), ("GET", "/v1/approvals", {"headers": ALICE})
    )
    assert (unconfigured.status_code, unconfigured.json()["error"]) == (
        404,
        "approvals-not-configured",
    )


def test_named_tokens_are_checked_when_loaded(tmp_path: Path) -> None:
    cases = {
        'alice = "short"': "is 5 characters long",
        f'alice = "{APPROVER_TOKEN}"\nbob = "{APPROVER_TOKEN}"': "alice and bob have the same",
        f'"al ice" = "{APPROVER_TOKEN}"': "token name 'al ice' must match",
        "alice = 3": "alice must be a string token",
        "": "the file names no token",
    }
    for text, expected in cases.items():
        path = tmp_path / "approvers.toml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=expected):
            load_named_tokens(path)
    with pytest.raises(InputError, match="the runs API token is also an approver token"):
        ApiSettings(root=tmp_path, token=APPROVER_TOKEN, approvers={"alice": APPROVER_TOKEN})


def test_serve_api_serves_the_channel_from_its_options(tmp_path: Path) -> None:
    config = write_gated_root(tmp_path)
    handle = _pending(config, {"branch": "feature"})
    port = free_port()
    args = ["serve-api", "--root", str(tmp_path), "--port", str(port)]
    args += ["--approvals-store", str(tmp_path / "approvals.sqlite")]
    args += ["--approvers", str(write_approvers(tmp_path))]
    base = f"http://127.0.0.1:{port}"
    with spawn(args, port, env={"TOOLPROOF_API_TOKEN": RUNS_TOKEN}):
        decided = httpx.post(
            f"{base}/v1/approvals/{handle}", json={"decision": "approve"}, headers=ALICE
        )
    assert (decided.status_code, decided.json()["who"]) == (200, "alice")


def test_no_auth_on_the_runs_api_still_needs_an_approver_token(gated: tuple[Path, str]) -> None:
    config, _ = gated
    settings = ApiSettings(
        root=config.parent,
        auth_disabled=True,
        approvals_store=config.parent / "approvals.sqlite",
        approvers={"alice": APPROVER_TOKEN},
    )
    runs, bare, named = _http(
        settings,
        ("GET", "/v1/runs", {}),
        ("GET", "/v1/approvals", {}),
        ("GET", "/v1/approvals", {"headers": ALICE}),
    )
    assert (runs.status_code, bare.status_code, named.status_code) == (200, 401, 200)
    assert bare.json()["message"] == "missing bearer token (Authorization: Bearer ...)"
