"""The runs API as a user types it; `mypy --strict` checks it in CI."""

from __future__ import annotations

from pathlib import Path

from toolproof import (
    RunSpec,
    execute_run,
    load_spec,
    load_toolset,
    replay_run,
    verify_run,
)
from toolproof.contract import Claim, SupportRef


async def use(spec_path: Path, root: Path) -> list[SupportRef]:
    loaded = load_spec(spec_path)
    spec: RunSpec = loaded.spec
    async with load_toolset(loaded.toolset_path) as toolset:
        outcome = await execute_run(spec, root=root, toolset=toolset)
        ok: bool = verify_run(outcome.path).ok
        replay = await replay_run(outcome.path, toolset=toolset.descriptor())
        assert ok and replay.identical and replay.live_calls == 0
    claims: list[Claim] = outcome.outcome.claims
    return [support for claim in claims for support in claim.supports]
