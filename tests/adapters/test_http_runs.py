"""Runs through the HTTP API: create, list, get, trace, files, verify, replay (real uvicorn)."""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import free_port, spawn

from toolproof.bundle.attest import attest_run
from toolproof.bundle.dsse import generate_key
from toolproof.bundle.evidence import RunEvidence

TOKEN = "runs-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"


def example_spec() -> dict[str, Any]:
    return tomllib.loads((EXAMPLE / "spec.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    root = tmp_path_factory.mktemp("root")
    for name in ("toolproof.toml", "evidence_tools.py"):
        shutil.copy(EXAMPLE / name, root / name)
    port = free_port()
    args = ["serve-api", "--root", str(root), "--port", str(port)]
    with (
        spawn(args, port, env={"TOOLPROOF_API_TOKEN": TOKEN}),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=60) as client,
    ):
        yield client, root


@pytest.fixture(scope="module")
def created(api: tuple[httpx.Client, Path]) -> dict[str, Any]:
    answer = api[0].post("/v1/runs", json={"spec": example_spec()})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_create_runs_the_spec_and_answers_the_run(created: dict[str, Any]) -> None:
    assert created["run_id"].startswith("run_")
    assert (created["task"], created["outcome"], created["tool_calls"], created["failures"]) == (
        "How many apples and plums are in stock, and where are the apples kept?",
        "passed",
        3,
        [],
    )


def test_the_same_spec_again_reuses_the_run(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    again = api[0].post("/v1/runs", json={"spec": example_spec()}).json()
    assert (again["run_id"], again["reused"]) == (created["run_id"], True)


def test_get_answers_spec_plan_report_claims_and_manifest(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    run_id = created["run_id"]
    body = api[0].get(f"/v1/runs/{run_id}").json()
    directory = api[1] / "runs" / run_id
    for name in ("spec", "plan", "report", "claims", "manifest"):
        assert body[name] == json.loads((directory / f"{name}.json").read_bytes()), name
    assert [node["id"] for node in body["plan"]["nodes"]] == [
        "apples",
        "plums",
        "fruit",
        "derive",
        "verify",
        "finalize",
    ]
    assert [claim["statement"] for claim in body["claims"]][:2] == [
        "Counts are taken at the start of the day.",
        "There are 12 apples, kept on shelf A1.",
    ]


def test_the_trace_streams_as_ndjson_pages(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    run_id = created["run_id"]
    lines = (api[1] / "runs" / run_id / "trace.jsonl").read_bytes().splitlines(keepends=True)
    whole = api[0].get(f"/v1/runs/{run_id}/trace")
    assert whole.headers["content-type"] == "application/x-ndjson"
    assert (whole.content, whole.headers.get("x-next-start")) == (b"".join(lines), None)
    page = api[0].get(f"/v1/runs/{run_id}/trace", params={"start": 2, "limit": 3})
    assert (page.content, page.headers["x-next-start"]) == (b"".join(lines[2:5]), "5")


def test_files_are_served_exactly_and_confined(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    run_id = created["run_id"]
    directory = api[1] / "runs" / run_id
    stored = RunEvidence.open(directory)
    name = stored.names()[0]  # an item of the run's pack, served by its name
    answer = api[0].get(f"/v1/runs/{run_id}/files/evidence/{name}")
    assert (answer.status_code, answer.content) == (200, stored.read(name))
    assert api[0].get(f"/v1/runs/{run_id}/files/evidence/{'0' * 64}").status_code == 404
    pack = api[0].get(f"/v1/runs/{run_id}/files/evidence.pack")
    assert (pack.status_code, pack.content) == (200, (directory / "evidence.pack").read_bytes())
    escaped = api[0].get(f"/v1/runs/{run_id}/files/..%2F..%2F..%2Ftoolproof.toml")
    assert escaped.status_code == 422
    assert escaped.json()["message"] == (
        "path '../../../toolproof.toml' has a '..' segment (no '.', '..' or '//')"
    )


def test_verify_and_replay_pass_on_an_intact_run(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    run_id = created["run_id"]
    verified = api[0].post(f"/v1/runs/{run_id}/verify").json()
    assert (verified["ok"], verified["failures"], verified["report"]["outcome"]) == (
        True,
        [],
        "passed",
    )
    replayed = api[0].post(f"/v1/runs/{run_id}/replay").json()
    assert (replayed["identical"], replayed["live_calls"], replayed["first_difference"]) == (
        True,
        0,
        None,
    )


def test_listing_pages_by_cursor(api: tuple[httpx.Client, Path], created: dict[str, Any]) -> None:
    client = api[0]
    second = example_spec() | {"seed": 8}
    other = client.post("/v1/runs", json={"spec": second}).json()["run_id"]
    ids = sorted([created["run_id"], other])
    first = client.get("/v1/runs", params={"limit": 1}).json()
    assert (
        [run["run_id"] for run in first["runs"]],
        first["next_cursor"],
    ) == ([ids[0]], ids[0])
    rest = client.get("/v1/runs", params={"limit": 1, "cursor": ids[0]}).json()
    assert ([run["run_id"] for run in rest["runs"]], rest["next_cursor"]) == ([ids[1]], None)
    assert rest["runs"][0]["outcome"] == "passed"


def test_a_spec_that_does_not_plan_is_a_422_naming_the_step(
    api: tuple[httpx.Client, Path],
) -> None:
    spec = example_spec()
    spec["steps"][0]["tool"] = "nope"
    answer = api[0].post("/v1/runs", json={"spec": spec})
    assert answer.status_code == 422
    assert answer.json()["message"].startswith(
        "step 'apples' calls unknown tool 'nope' (the toolset has: "
    )


def test_a_toolset_outside_the_root_is_refused(api: tuple[httpx.Client, Path]) -> None:
    answer = api[0].post("/v1/runs", json={"spec": example_spec() | {"toolset": "../x.toml"}})
    assert answer.status_code == 422
    assert answer.json()["message"] == (
        "<request body>: toolset: path '../x.toml' has a '..' segment (no '.', '..' or '//')"
    )


def test_a_tampered_run_fails_verify_and_replay_is_refused(
    api: tuple[httpx.Client, Path], created: dict[str, Any]
) -> None:
    client, root = api
    spec = example_spec() | {"seed": 99}
    run_id = client.post("/v1/runs", json={"spec": spec}).json()["run_id"]
    claims = root / "runs" / run_id / "claims.json"
    claims.write_bytes(claims.read_bytes().replace(b"12 apples", b"13 apples"))
    verified = client.post(f"/v1/runs/{run_id}/verify").json()
    assert verified["ok"] is False
    assert verified["failures"][0]["check"] == "manifest"
    assert verified["failures"][0]["file"] == "claims.json"
    refused = client.post(f"/v1/runs/{run_id}/replay")
    assert refused.status_code == 409
    assert refused.json()["error"] == "replay-refused"
    assert refused.json()["message"].startswith("frozen replay refused: [manifest] claims.json:")


def test_attestations_are_served_as_stored(
    api: tuple[httpx.Client, Path], created: dict[str, Any], tmp_path: Path
) -> None:
    client, root = api
    run_id = created["run_id"]
    assert client.get(f"/v1/runs/{run_id}/attestations").json() == {
        "run_id": run_id,
        "envelopes": [],
        "keys": {},
    }
    key = generate_key(tmp_path / "producer")
    path = attest_run(root / "runs" / run_id, key).path
    answer = client.get(f"/v1/runs/{run_id}/attestations")
    assert answer.status_code == 200
    assert answer.json() == {
        "run_id": run_id,
        "envelopes": [json.loads(path.read_bytes())],
        "keys": {key.public.key_id: key.public.pem().decode()},
    }
    missing = client.get(f"/v1/runs/run_{'0' * 64}/attestations")
    assert missing.status_code == 404
