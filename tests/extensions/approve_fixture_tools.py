"""Tools for the approval tests: a destructive body whose side effect is a file."""

from __future__ import annotations

from pathlib import Path

import toolproof


@toolproof.tool(destructive=True)
async def delete_branch(path: str, branch: str, force: bool = False) -> str:
    """Delete a branch: appends the branch name to the file at ``path`` (the side effect)."""
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(f"{branch} force={force}\n")
    return f"deleted {branch}"


@toolproof.tool(read_only=True)
async def list_branches(prefix: str = "") -> list[str]:
    """List branches (read-only)."""
    return [name for name in ("main", "dev") if name.startswith(prefix)]
