"""Tools for the approval tests whose dangerous parameter defaults to on."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

import toolproof


@toolproof.tool(destructive=True)
async def wipe(path: str, force: bool = True) -> str:
    """Wipe: appends ``force=<value>`` to the file at ``path`` (the side effect)."""
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(f"force={force}\n")
    return "wiped"


class Options(BaseModel):
    """How to purge; ``force`` is on unless turned off."""

    force: bool = True


@toolproof.tool(destructive=True)
async def purge(path: str, options: Options = Options()) -> str:  # noqa: B008
    """Purge: appends ``force=<value>`` to the file at ``path`` (the side effect)."""
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(f"force={options.force}\n")
    return "purged"
