"""What did not bind is never found missing later (issue 30 item 20).

The README tour's combo ``[["retry", "timeout"]]`` without ``seconds``: ``add_retry``
still binds (a combo binds its valid prefix), ``add_retry_timeout`` is quarantined
naming the layer (``tools.add.extensions[0][1]``) and the rule; ``tools list --strict``
exits 1 on it; ``serve``, ``run`` and ``call`` print the quarantine table on stderr
before they start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Ran, toolproof

from toolproof.adapters.cli.app import err_console

SCRIPT = Path(sys.executable).parent / "toolproof"
TOOLS = '''\
import toolproof


@toolproof.tool(read_only=True)
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b
'''
RULE = (
    "cannot apply combo [retry, timeout] to tool 'add': invalid config for extension "
    "'timeout': seconds: Field required (its valid prefix binds: add_retry)"
)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table row per item: the rule is read whole, whatever width another test left."""
    monkeypatch.setattr(err_console, "width", 400)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(TOOLS, encoding="utf-8")
    path = tmp_path / "toolproof.toml"
    path.write_text(
        '[[python]]\nmodule = "calc"\n\n[tools.add]\nextensions = [["retry", "timeout"]]\n',
        encoding="utf-8",
    )
    return path


def _cli(*args: str, cwd: Path) -> Ran:
    return toolproof(*args, cwd=cwd, env={"COLUMNS": "400"})


def _shows_the_table(stderr: str) -> None:
    assert "quarantined" in stderr
    assert "add_retry_timeout" in stderr and "tools.add.extensions[0][1]" in stderr
    assert RULE in stderr
    assert "toolproof: 1 quarantined, not bound (`toolproof tools list --strict` exits 1" in stderr


def test_the_valid_prefix_binds_and_the_layer_is_named(config: Path) -> None:
    done = _cli("tools", "list", "--json", "-c", str(config), cwd=config.parent)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [tool["name"] for tool in document["tools"]] == ["add", "add_retry"]
    assert document["quarantined"] == [
        {
            "name": "add_retry_timeout",
            "field": "tools.add.extensions[0][1]",
            "rule": RULE,
            "owner": "extensions",
        }
    ]
    strict = _cli("tools", "list", "--strict", "-c", str(config), cwd=config.parent)
    assert strict.returncode == 1
    assert "add_retry_timeout" in strict.stdout


def test_run_prints_the_quarantine_table_before_it_refuses(config: Path) -> None:
    spec = config.parent / "spec.toml"
    spec.write_text(
        'task = "t"\ntoolset = "toolproof.toml"\n\n[[steps]]\nid = "s"\n'
        'tool = "add_retry_timeout"\narguments = { a = 1 }\n',
        encoding="utf-8",
    )
    done = _cli("run", str(spec), "--root", str(config.parent / "out"), cwd=config.parent)
    assert done.returncode == 1
    _shows_the_table(done.stderr)
    assert "step 's' calls unknown tool 'add_retry_timeout'" in done.stderr
    assert done.stderr.index(RULE) < done.stderr.index("calls unknown tool")


def test_call_prints_the_table_and_names_the_quarantined_tool(config: Path) -> None:
    done = _cli(
        "call", "add_retry_timeout", "--args", '{"a": 1}', "-c", str(config), cwd=config.parent
    )
    assert (done.returncode, done.stdout) == (1, "")
    _shows_the_table(done.stderr)
    assert done.stderr.splitlines()[-1] == (
        f"error: tool 'add_retry_timeout' in {config} is quarantined, not bound: {RULE}"
    )
    bound = _cli("call", "add_retry", "--args", '{"a": 1}', "-c", str(config), cwd=config.parent)
    assert (bound.returncode, bound.stdout) == (0, "2\n")


def test_serve_prints_the_quarantine_table_on_stderr(config: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "serve", "--config", str(config)],
        input=b"",  # stdin at its end: the stdio server stops cleanly at once
        capture_output=True,
        cwd=config.parent,
        env={**os.environ, "COLUMNS": "400"},
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b"")
    stderr = done.stderr.decode()
    _shows_the_table(stderr)
    assert "toolproof: serving 2 tools over MCP stdio" in stderr


def test_a_clean_config_prints_no_table(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(TOOLS, encoding="utf-8")
    config = tmp_path / "toolproof.toml"
    config.write_text('[[python]]\nmodule = "calc"\n', encoding="utf-8")
    done = _cli("call", "add", "--args", '{"a": 1}', "-c", str(config), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "2\n", "")
