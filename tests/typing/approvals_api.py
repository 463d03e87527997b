"""The approvals API as a user types it; `mypy --strict` checks it in CI."""

from __future__ import annotations

from pathlib import Path

from toolproof import (
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalStore,
    Approver,
    Decision,
    load_toolset,
    record_session,
)


async def approver(request: ApprovalRequest) -> bool | Decision:
    digest: str = request.arguments_digest
    if request.rule is not None and digest:
        return Decision(True, arguments={**request.arguments, "force": False}, reason="edited")
    return request.tool.endswith("_approve")


async def use(config: Path, root: Path) -> str | None:
    channel: Approver = approver
    async with load_toolset(config, approver=channel) as toolset:
        result = await toolset["delete_branch_approve"].call({"branch": "b"})
        assert result.ok or (result.failure is not None and result.failure.kind)
    async with record_session(config, root=root, task="t", approver=channel) as session:
        await session.toolset["delete_branch_approve"].call({"branch": "b"})
    policy = ApprovalPolicy(timeout_seconds=30, mode="defer")
    store = ApprovalStore(config.parent / policy.store)
    pending = [row.id for row in store.list()]
    decided = store.decide(pending[0], approve=False, who="me", channel="cli") if pending else None
    return None if decided is None else decided.status
