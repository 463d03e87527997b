"""Tools for the ``[policy]`` tests: each body writes its marker file, so a test sees it ran."""

from __future__ import annotations

from pathlib import Path

import toolproof


@toolproof.tool
async def transfer(to: str, amount: int, marker: str) -> str:
    """Move ``amount`` to ``to`` (writes ``marker``)."""
    Path(marker).write_text(f"{to} {amount}\n", encoding="utf-8")
    return f"sent {amount} to {to}"


@toolproof.tool(destructive=True)
async def purge(marker: str) -> str:
    """Delete everything (writes ``marker``)."""
    Path(marker).write_text("purged\n", encoding="utf-8")
    return "purged"
