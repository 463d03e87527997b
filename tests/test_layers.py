"""DESIGN section 2's layering holds (import-linter's contracts); no source file is too long."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_import_linter_contract_is_kept() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    count = len(contracts["tool"]["importlinter"]["contracts"])
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    types = sorted(contract["type"] for contract in contracts["tool"]["importlinter"]["contracts"])
    assert types == ["acyclic_siblings", "layers"]
    assert f"Contracts: {count} kept, 0 broken." in done.stdout, done.stdout[-3000:]
    assert done.returncode == 0


def test_the_floors_are_design_s_floors() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [layers] = [
        contract["layers"]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract["type"] == "layers"
    ]
    assert layers == [
        "adapters | testing",
        "config",
        "sessions",
        "backends",
        "runs",
        "extensions",
        "verify",
        "sources",
        "tools",
        "schema",
        "evidence",
        "bundle",
        "contract",
        "identity",
        "plugins",
        "errors",
        "failures | problems | redaction | version",
    ]
    folders = {path.name for path in (ROOT / "src" / "toolproof").iterdir() if path.is_dir()}
    modules = {path.stem for path in (ROOT / "src" / "toolproof").glob("*.py")}
    named = {name.strip() for layer in layers for name in layer.split("|")}
    # every folder and top-level module of the package is on a floor
    assert (folders - {"__pycache__"}) | (modules - {"__init__", "__main__"}) == named


MAX_LINES = 500  # issue 29 point 6: a file a reader can hold in mind


def test_no_source_file_is_over_500_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "src").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
