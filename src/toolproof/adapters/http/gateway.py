"""The runs operations behind the HTTP API: the same functions the CLI calls.

Each runs its blocking part (hashing, file I/O) off the event loop. Errors are
toolproof errors, mapped to HTTP statuses by :func:`toolproof.errors.error_mapping`
(a bad spec 422, a refused replay 409).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolproof.adapters.http.settings import ApiSettings
from toolproof.bundle.paths import confine
from toolproof.config import load_toolset
from toolproof.runs.replay import replay_run as replay_frozen
from toolproof.runs.run import RunOutcome, execute_run
from toolproof.runs.spec import parse_spec
from toolproof.verify.verifier import Verification
from toolproof.verify.verifier import verify_run as verify_directory

__all__ = ["create_run", "replay_run", "verify_run"]


async def create_run(settings: ApiSettings, spec_json: dict[str, Any]) -> RunOutcome:
    """Plan, execute and verify a spec; commit it under ``<root>/runs/``.

    Args:
        settings: the API settings (the artifact root).
        spec_json: the spec document; its ``toolset`` is relative POSIX to the root.

    Raises:
        ConfigError: the spec or its composition root is invalid (HTTP 422).
        InputError: the toolset path or the ``runs`` folder leaves the root, or the spec
            cannot be planned (422).

    """
    spec = parse_spec(spec_json, "<request body>")
    confine(settings.root, "runs", what="runs folder")  # never write through a symlink out
    toolset_path = confine(settings.root, spec.toolset, what="spec.toolset")
    async with load_toolset(toolset_path) as toolset:
        return await execute_run(
            spec, root=settings.root, toolset=toolset, registries=settings.registries
        )


async def verify_run(settings: ApiSettings, directory: Path) -> Verification:
    """Verify a run directory (manifest, ordered checks, stored report), in a thread.

    Its checks are looked up in ``settings.registries.checks``.
    """
    checks = settings.registries.checks
    return await asyncio.to_thread(verify_directory, directory, checks=checks)


async def replay_run(settings: ApiSettings, directory: Path) -> dict[str, Any]:
    """Replay a run frozen against its recorded runtime; answer the result as JSON.

    Its reasoner and checks are looked up in ``settings.registries``.

    Raises:
        ReplayRefused: a tampered file or an unrecorded call (HTTP 409).

    """
    result = await replay_frozen(directory, registries=settings.registries)
    return result.to_json()
