"""What the command line imports before it knows which command runs (issue 31).

Each command imports its heavy modules inside the command function, so ``toolproof
--help`` or ``toolproof verify --help`` loads no server, SDK, policy engine or
regex pattern set. A fresh interpreter is the point (``sys.modules`` of the test
process already holds everything), so each case runs in a subprocess that invokes
the Typer app in-process and prints which of the named modules it imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolproof.version import __version__

HEAVY = (
    "celery",
    "cedarpy",
    "fastapi",
    "httpx",
    "mcp",
    "opentelemetry",
    "pydantic_ai",
    "regex",
    "rich.progress",
    "starlette",
    "uvicorn",
    "toolproof.adapters.http",
    "toolproof.adapters.mcp",
    "toolproof.adapters.session",
    "toolproof.adapters.telemetry",
    "toolproof.backends",
    "toolproof.bundle",
    "toolproof.config",
    "toolproof.evidence.details",
    "toolproof.extensions",
    "toolproof.runs",
    "toolproof.tools",
    "toolproof.verify.verifier",
)
"""Modules a command line that only shows help or its version has no use for."""

_PROBE = """
import contextlib, io, json, sys
from toolproof.adapters.cli import app
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        app(args=sys.argv[2:], prog_name="toolproof")
    except SystemExit as exc:
        code = exc.code
heavy = [name for name in json.loads(sys.argv[1]) if name in sys.modules]
first = next(line.strip() for line in out.getvalue().splitlines() if line.strip())
print(json.dumps({"code": code, "heavy": heavy, "first_line": first}))
"""


def _imported(*args: str, names: tuple[str, ...] = HEAVY) -> dict[str, object]:
    ran = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(names), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    result: dict[str, object] = json.loads(ran.stdout)
    return result


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (("--version",), f"toolproof {__version__}"),
        (("--help",), "Usage: toolproof [OPTIONS] COMMAND [ARGS]..."),
        (("verify", "--help"), "Usage: toolproof verify [OPTIONS] RUN"),
    ],
)
def test_help_and_version_import_no_heavy_module(args: tuple[str, ...], first_line: str) -> None:
    assert _imported(*args) == {"code": 0, "heavy": [], "first_line": first_line}


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "layout_files"
RUN = next(FIXTURE.glob("run_*"))

NOT_FOR_VERIFY = (
    "celery",
    "cedarpy",
    "fastapi",
    "mcp",
    "opentelemetry",
    "pydantic_ai",
    "starlette",
    "uvicorn",
    "toolproof.adapters.http",
    "toolproof.adapters.mcp",
    "toolproof.adapters.session",
    "toolproof.adapters.telemetry",
    "toolproof.backends",
    "toolproof.bundle.attest",
    "toolproof.config.root",
    "toolproof.extensions",
    "toolproof.runs.finalize",
)
"""What ``verify RUN`` (no ``--otel-spans``, no signature asked) has no use for: no
server, SDK, backend, extension, policy engine, none of the Toolset's root, and not
the recorder's finalize."""


def test_verify_of_a_run_imports_no_server_backend_or_toolset_root() -> None:
    found = _imported("verify", str(RUN), names=NOT_FOR_VERIFY)
    assert found == {"code": 0, "heavy": [], "first_line": f"verify {RUN.name}"}
