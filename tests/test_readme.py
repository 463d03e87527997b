"""The README's first use holds on a clone with nothing beside it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SERVICES = (ROOT / ".ci" / "services").read_text(encoding="utf-8")


def _bash_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", README, re.M | re.S)


def test_the_first_screen_is_install_and_run_then_the_tests() -> None:
    install, tests = _bash_blocks()[:2]
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e")
    assert "toolproof run examples/python-docs/spec.toml" in install
    assert tests == "bash .ci/services && pytest\n"
    assert README.index(tests) < README.index("## What the first command shows")


def test_the_readme_names_what_the_tests_need_and_where_it_comes_from() -> None:
    section = README[README.index("## Running the tests") :]
    python = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"Python {python['requires-python'].replace('>=', '>= ')}" in section
    # every service .ci/services provides, and the variable that points the tests at it
    assert "redis-server" in SERVICES and "`redis-server` on `PATH`" in section
    assert "bash .ci/services stop" in section and '"${1:-}" = "stop"' in SERVICES
    variables = sorted(set(re.findall(r"TOOLPROOF_[A-Z0-9_]+", SERVICES)))
    assert variables == [
        "TOOLPROOF_LLM_BASE_URL",
        "TOOLPROOF_MCP1_VENV",
        "TOOLPROOF_MCP_CONFORMANCE",
        "TOOLPROOF_MCP_EVERYTHING",
        "TOOLPROOF_PHOENIX_URL",
    ]
    for variable in variables:
        assert f"`{variable}`" in section, variable
    for folder in re.findall(r"\.ci-cache/[a-z0-9-]+", SERVICES):
        assert f"`{folder}/`" in section, folder
    assert "Node.js and npm" in section
