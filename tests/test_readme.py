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
        "TOOLPROOF_MCP_NODE",
        "TOOLPROOF_PHOENIX_URL",
        "TOOLPROOF_TEMPORAL_ADDRESS",
    ]
    for variable in variables:
        assert f"`{variable}`" in section, variable
    for folder in re.findall(r"\.ci-cache/[a-z0-9-]+", SERVICES):
        assert f"`{folder}/`" in section, folder
    assert "Node.js and npm" in section


def test_installs_from_a_clone_until_toolproof_is_published() -> None:
    # Issue 30 item 23: the docs said `pip install 'toolproof[http]'`; no such package is
    # published. Every page and every "needs its extra" message says how to install
    # from a clone instead; the README's Installing section says why and what CI checks.
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    sources = sorted((ROOT / "src" / "toolproof").rglob("*.py"))
    texts = {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in [*pages, *sources]
    }
    index_installs = [
        f"{name}: {match}"
        for name, text in texts.items()
        for match in re.findall(r"pip install '?toolproof\[[^\]]*\][^`'\s]*", text)
    ]
    assert index_installs == []
    section = README[README.index("## Installing") : README.index("## Running the tests")]
    assert "**not published on PyPI yet**" in section
    assert "pip install -e '.[http,otel]' -c constraints.txt" in section
    assert "toolproof is pure Python" in section and ".ci/package" in section
    assert list((ROOT / "src").rglob("*.c")) == []  # the claim "pure Python" holds


def test_a_missing_extra_names_the_install_from_a_clone() -> None:
    from toolproof.version import install_hint

    assert install_hint("http") == (
        "pip install -e '.[http]' -c constraints.txt in a clone of toolproof "
        "(it is not on PyPI yet; README, Installing)"
    )
