"""A destructive tool for the approval tests that run it in a worker process."""

from __future__ import annotations

import os
from pathlib import Path

import toolproof


@toolproof.tool(destructive=True)
async def remove(path: str, branch: str) -> int:
    """Remove a branch: appends ``<branch> pid=<pid>`` to ``path``; returns the pid."""
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(f"{branch} pid={os.getpid()}\n")
    return os.getpid()
