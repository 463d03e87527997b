"""The official MCP conformance suite against ``toolproof serve``, as a proxy and natively.

``@modelcontextprotocol/conformance`` (pinned in ``.ci/services``, installed into
``.ci-cache/conformance``) runs every server scenario (``--suite all``: the active ones
and the pending elicitation ones) against ``toolproof serve --http``:

* **proxy**: an ``[[mcp]]`` import (``prefix = ""``) of
  ``tests/fixtures/conformance/reference_server.py`` over stdio;
* **native**: ``tests/fixtures/conformance/native.toml``, the scenarios as Python tools.

The pass table in ``docs/serve.md`` is the floor: a scenario marked PASS there that
fails now is a regression and fails the test; a scenario the table does not name (the
suite grew) fails it too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from serve_helpers import free_port, spawn

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "conformance"
DOC = ROOT / "docs" / "serve.md"
CONFORMANCE_ENV = "TOOLPROOF_MCP_CONFORMANCE"
CONFORMANCE_DEFAULT = ROOT / ".ci-cache" / "conformance" / "node_modules" / ".bin" / "conformance"
TABLE_START = "<!-- conformance pass table -->"
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def conformance_bin() -> Path:
    """The ``conformance`` launcher (npm); fails under CI=true when missing."""
    path = Path(os.environ.get(CONFORMANCE_ENV) or CONFORMANCE_DEFAULT)
    if not path.exists():
        message = (
            f"@modelcontextprotocol/conformance not installed at {path} "
            f"(run .ci/services, or set {CONFORMANCE_ENV})"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def pass_table() -> dict[str, dict[str, str]]:
    """``{column: {scenario: "PASS" | "FAIL"}}`` from the table in docs/serve.md."""
    text = DOC.read_text(encoding="utf-8")
    rows = text.split(TABLE_START, 1)[1].strip().splitlines()
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["scenario", "proxy", "native"], header
    table: dict[str, dict[str, str]] = {"proxy": {}, "native": {}}
    for row in rows[2:]:
        if not row.startswith("|"):
            break
        scenario, proxy, native = (cell.strip().strip("`") for cell in row.strip("|").split("|"))
        table["proxy"][scenario] = proxy
        table["native"][scenario] = native
    return table


def proxy_config(tmp_path: Path) -> Path:
    config = tmp_path / "proxy.toml"
    config.write_text(
        "[[mcp]]\n"
        'name = "reference"\n'
        f'command = "{sys.executable}"\n'
        f'args = ["{FIXTURES / "reference_server.py"}"]\n'
        'prefix = ""\n'
        'protocol = "2025-11-25"\n',  # its scenarios ask as 2025-11-25 servers do
        encoding="utf-8",
    )
    return config


def run_suite(config: Path, out: Path) -> dict[str, str]:
    """Serve ``config`` over HTTP, run the whole server suite; ``{scenario: PASS | FAIL}``."""
    launcher = conformance_bin()
    port = free_port()
    with spawn(["serve", "--config", str(config), "--http", f"127.0.0.1:{port}"], port):
        url = f"http://127.0.0.1:{port}/mcp"
        subprocess.run(
            [str(launcher), "server", "--url", url, "--suite", "all", "-o", str(out)],
            capture_output=True,
            timeout=600,
            check=False,
        )
    measured: dict[str, str] = {}
    for entry in sorted(out.iterdir()):
        match = RESULT_DIR.match(entry.name)
        assert match is not None, entry.name
        checks = (entry / "checks.json").read_text(encoding="utf-8")
        failed = '"status": "FAILURE"' in checks or not checks.strip()
        measured[match["scenario"]] = "FAIL" if failed else "PASS"
    return measured


@pytest.mark.service
@pytest.mark.timeout(900)
@pytest.mark.parametrize("column", ["proxy", "native"])
def test_the_suite_passes_every_scenario_of_the_pass_table(column: str, tmp_path: Path) -> None:
    config = proxy_config(tmp_path) if column == "proxy" else FIXTURES / "native.toml"
    measured = run_suite(config, tmp_path / "results")
    floor = pass_table()[column]
    shown = "\n".join(f"{name}: {measured.get(name, 'MISSING')}" for name in sorted(measured))
    assert sorted(measured) == sorted(floor), f"the table must name every scenario:\n{shown}"
    regressions = [
        name for name, status in floor.items() if status == "PASS" and measured[name] != "PASS"
    ]
    assert regressions == [], f"{column}: regressed {regressions}; measured:\n{shown}"
