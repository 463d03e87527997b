"""The public surface of ``import toolproof`` (DESIGN.md section 10)."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import toolproof

# DESIGN.md section 10: names outside tests rely on. They may grow, never shrink.
FIXED_NAMES = {
    "canonical_json",
    "digest",
    "Tool",
    "ToolSpec",
    "ToolCall",
    "ToolResult",
    "ToolFailure",
    "Toolset",
    "ToolContribution",
    "bind_contribution",
    "ExtensionKind",
    "extension",
    "wrapper",
    "transformer",
    "load_toolset",
}


def public_names() -> list[str]:
    return sorted(
        name
        for name in dir(toolproof)
        if not name.startswith("_") and not inspect.ismodule(getattr(toolproof, name))
    )


def test_all_is_exactly_the_sorted_public_names() -> None:
    assert toolproof.__all__ == sorted(toolproof.__all__)
    assert [name for name in toolproof.__all__ if name != "__version__"] == public_names()
    assert "__version__" in toolproof.__all__


def test_design_names_are_exported() -> None:
    assert FIXED_NAMES - set(toolproof.__all__) == set()


def test_import_does_not_pull_optional_adapters() -> None:
    code = (
        "import json, sys, toolproof\n"
        "heavy = ('langchain', 'langchain_core', 'fastapi', 'celery', 'uvicorn', 'pydantic_ai',"
        " 'redis', 'starlette', 'opentelemetry')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_no_module_imports_the_package_root() -> None:
    # The root re-exports every layer; a module importing it would import upward
    # (the adapters read __version__ from the leaf toolproof.version).
    root = Path(toolproof.__file__).parent
    upward = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "toolproof" and node.level == 0:
                upward.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.Import) and any(a.name == "toolproof" for a in node.names):
                upward.append(f"{path.relative_to(root)}:{node.lineno}")
    assert upward == []


PLUGIN_NAMES = {
    "Check",
    "CheckSpec",
    "Finding",
    "Severity",
    "PluginDescriptor",
    "register_check",
    "Reasoner",
    "ReasonerRequest",
    "register_reasoner",
    "RuntimePlugin",
    "Retriever",
}
CONTRACT_NAMES = {
    "Claim",
    "EvidenceRecord",
    "SupportRef",
    "ExecutionRuntime",
    "ToolDescriptor",
    "ToolsetDescriptor",
}


def test_plugin_interfaces_and_contract_models_have_their_own_namespaces() -> None:
    import toolproof.contract
    import toolproof.plugins

    assert set(toolproof.plugins.__all__) >= PLUGIN_NAMES
    assert set(toolproof.contract.__all__) >= CONTRACT_NAMES
    for name in PLUGIN_NAMES:
        assert getattr(toolproof.plugins, name) is not None
    assert (PLUGIN_NAMES | CONTRACT_NAMES) & set(toolproof.__all__) == set()


RENAMED = {"ReasonerBackend": "Reasoner", "RetrievalBackend": "Retriever"}
"""Plugin interfaces renamed ("backend" names only the relocation seam) -> their names now."""


def test_a_name_that_moved_still_works_from_the_top_with_a_warning() -> None:
    import toolproof.contract
    import toolproof.plugins

    moved = PLUGIN_NAMES - set(RENAMED.values())
    for name, home in [
        *((n, toolproof.plugins) for n in moved),
        *((n, toolproof.contract) for n in CONTRACT_NAMES),
    ]:
        with pytest.warns(DeprecationWarning, match=f"toolproof.{name} moved to {home.__name__}"):
            assert getattr(toolproof, name) is getattr(home, name)


def test_a_renamed_plugin_interface_still_works_with_a_warning_naming_the_new_name() -> None:
    import toolproof.plugins

    for old, new in RENAMED.items():
        assert old not in toolproof.plugins.__all__
        with pytest.warns(DeprecationWarning) as plugins_warning:
            assert getattr(toolproof.plugins, old) is getattr(toolproof.plugins, new)
        with pytest.warns(DeprecationWarning) as top_warning:
            assert getattr(toolproof, old) is getattr(toolproof.plugins, new)
        assert [str(w.message) for w in [*plugins_warning, *top_warning]] == [
            f"toolproof.plugins.{old} is deprecated: it is now {new} "
            f"(`from toolproof.plugins import {new}`)",
            f"toolproof.{old} is now toolproof.plugins.{new}: "
            f"use `from toolproof.plugins import {new}`",
        ]


def test_every_error_toolproof_raises_is_exported() -> None:
    from toolproof.errors import ERROR_TABLE

    assert {cls.__name__ for cls in ERROR_TABLE} <= set(toolproof.__all__)
    assert {"InputError", "RecordingError", "BackendError"} <= set(toolproof.__all__)


def test_import_toolproof_loads_no_submodule_until_a_name_is_used() -> None:
    code = (
        "import json, sys, toolproof\n"
        "before = sorted(m for m in sys.modules if m.startswith('toolproof.'))\n"
        "toolproof.Tool\n"
        "print(json.dumps([before, 'toolproof.tools.tool' in sys.modules,"
        " 'httpx' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, loaded, _ = json.loads(done.stdout)
    assert before == ["toolproof.version"]
    assert loaded


# The extras a plain `pip install toolproof` (the wheel, `.ci/package`) does not bring.
EXTRA_ONLY = ("fastapi", "celery", "redis", "langchain", "langchain_core", "pydantic_ai", "agents")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["serve", "--help"]])
def test_the_cli_starts_without_any_extra(argv: list[str]) -> None:
    # Issue 30 item 23: the wheel installed alone failed at `toolproof --version` with
    # ModuleNotFoundError: fastapi (the CLI imported the HTTP API's package eagerly).
    code = (
        "import sys\n"
        "from importlib.abc import MetaPathFinder\n"
        f"blocked = {EXTRA_ONLY!r}\n"
        "class Block(MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in blocked:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
        "from toolproof.adapters.cli import main\n"
        f"main({argv!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    if argv == ["--version"]:
        assert done.stdout == f"toolproof {toolproof.__version__}\n"
    else:
        assert done.stdout.split()[:3] == [
            "Usage:",
            "toolproof",
            argv[0] if argv[1:] else "[OPTIONS]",
        ]
