"""`toolproof run` with a spec naming plugins: a check from an entry point, a broken one refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("sample_plugin")

TOOLS = '''
import toolproof


@toolproof.tool
def lookup(item: str) -> dict:
    """Look an item up."""
    return {"item": item, "note": "kept on shelf " + item.upper()}
'''

SPEC = """task = "Where is the pear?"

[[steps]]
id = "look"
tool = "lookup"
arguments = {{ item = "pear" }}

[reasoner]
name = "{reasoner}"

[[checks]]
name = "{check}"
"""


def _project(tmp_path: Path, reasoner: str, check: str) -> Path:
    (tmp_path / "cli_plugin_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text(
        '[[python]]\nmodule = "cli_plugin_tools"\n', encoding="utf-8"
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(reasoner=reasoner, check=check), encoding="utf-8")
    return spec


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from toolproof.adapters.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_spec_with_plugin_reasoner_and_check_runs_and_verifies(tmp_path: Path) -> None:
    spec = _project(tmp_path, "sample-quotes", "sample-statement-quotes")
    ran = _cli("run", str(spec), "--root", str(tmp_path), "--json")
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert (result["outcome"], result["claims"]) == ("passed", 1)
    verified = _cli("verify", result["run_id"], "--root", str(tmp_path), "--json")
    assert verified.returncode == 0, verified.stdout
    report = json.loads(verified.stdout)["report"]
    assert report["sequence"][-1] == "sample-statement-quotes"


def test_a_broken_plugin_check_refuses_the_run(tmp_path: Path) -> None:
    spec = _project(tmp_path, "sample-quotes", "sample-missing")
    ran = _cli("run", str(spec), "--root", str(tmp_path))
    assert ran.returncode == 1
    assert "check plugin 'sample-missing'" in ran.stderr
    assert "raised ModuleNotFoundError: No module named" in ran.stderr
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []
