"""schemathesis against the published OpenAPI of a real ``toolproof serve-api`` (bounded run).

Checks: no 5xx, responses conform to the documented schemas, status codes and content
types. The root holds one real run whose id schemathesis uses for the run operations.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
from serve_helpers import free_port, spawn

TOKEN = "fuzz-token-0123456789abcdef"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"
CHECKS = ",".join(
    [
        "not_a_server_error",
        "response_schema_conformance",
        "status_code_conformance",
        "content_type_conformance",
    ]
)


def test_schemathesis_finds_no_server_error_and_no_schema_violation(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for name in ("toolproof.toml", "evidence_tools.py"):
        shutil.copy(EXAMPLE / name, root / name)
    spec = tomllib.loads((EXAMPLE / "spec.toml").read_text(encoding="utf-8"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ["serve-api", "--root", str(root), "--port", str(port)]
    with spawn(args, port, env={"TOOLPROOF_API_TOKEN": TOKEN}):
        created = httpx.post(
            f"{base}/v1/runs",
            json={"spec": spec},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["run_id"]
        config = tmp_path / "schemathesis.toml"
        config.write_text(f'[parameters]\n"path.run_id" = "{run_id}"\n', encoding="utf-8")
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"),
                "--config-file",
                str(config),
                "--no-color",
                "run",
                f"{base}/openapi.json",
                "--header",
                f"Authorization: Bearer {TOKEN}",
                "--checks",
                CHECKS,
                "--max-examples",
                "50",
                "--phases",
                "examples,coverage,fuzzing",
                "--seed",
                "20261130",
                "--workers",
                "1",
                "--warnings",
                "off",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    # 14 operations: GET /v1/runs/{run_id}/summary is the 14th
    assert "Selected: 14/14" in done.stdout, done.stdout[-3000:]
