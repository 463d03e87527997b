"""The HTTP API resolves plugin names in the registries its settings carry (issue 29 point 5)."""

from __future__ import annotations

import asyncio
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from toolproof.adapters.http import gateway
from toolproof.adapters.http.settings import ApiSettings
from toolproof.config import run_registries
from toolproof.contract.runs import Severity
from toolproof.errors import InputError
from toolproof.verify.base import Check
from toolproof.verify.sequence import register_check

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"


def _root(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    for name in ("toolproof.toml", "evidence_tools.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    spec = tomllib.loads((EXAMPLE / "spec.toml").read_text(encoding="utf-8"))
    spec["checks"] = [{"name": "app-finds-nothing"}]
    return tmp_path, spec


def test_a_check_the_application_registered_serves_create_verify_and_replay(
    tmp_path: Path,
) -> None:
    root, spec = _root(tmp_path)
    registries = run_registries()
    check = Check(
        id="app-finds-nothing",
        invariant="INV-APP",
        severity=Severity.ERROR,
        summary="finds nothing",
        run=lambda view: [],
        version="1",
    )
    register_check(check, registry=registries.checks)
    settings = ApiSettings(root, auth_disabled=True, registries=registries)

    async def served() -> tuple[str, bool, dict[str, Any]]:
        outcome = await gateway.create_run(settings, spec)
        verified = await gateway.verify_run(settings, outcome.path)
        replayed = await gateway.replay_run(settings, outcome.path)
        return outcome.report.sequence[-1], verified.ok, replayed

    last, ok, replayed = asyncio.run(served())
    assert (last, ok, replayed["identical"]) == ("app-finds-nothing", True, True)


def test_by_default_only_installed_plugins_resolve(tmp_path: Path) -> None:
    root, spec = _root(tmp_path)
    settings = ApiSettings(root, auth_disabled=True)  # run_registries(): nothing registered
    with pytest.raises(InputError, match="unknown check 'app-finds-nothing'"):
        asyncio.run(gateway.create_run(settings, spec))
