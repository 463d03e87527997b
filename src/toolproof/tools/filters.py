"""Include/exclude filters of a tool source (``[[mcp]]`` and ``[[python]]``).

``include`` (globs, :func:`fnmatch.fnmatchcase`: ``*``, ``?``, ``[...]``, case
sensitive) keeps only the names that match one of them; ``exclude`` then drops the
names that match one of its globs. A glob that matches none of the source's names is
reported, so a misspelt filter does not pass unnoticed. Filters are part of the Toolset
descriptor: changing one changes run ids.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["ToolFilter"]

logger = logging.getLogger("toolproof.config")


@dataclass(frozen=True)
class ToolFilter:
    """The filter of one source.

    Attributes:
        source: the source, as owners are written (``mcp:git``, ``python:pkg.tools``).
        include: globs a name must match one of (``None``: every name).
        exclude: globs no kept name may match.

    """

    source: str
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Whether the filter filters anything (an ``include`` or an ``exclude`` is set)."""
        return self.include is not None or bool(self.exclude)

    def keeps(self, name: str) -> bool:
        """Whether ``name`` passes the filter."""
        if self.include is not None and not any(fnmatchcase(name, g) for g in self.include):
            return False
        return not any(fnmatchcase(name, glob) for glob in self.exclude)

    def unmatched(self, names: list[str]) -> list[str]:
        """The globs (``include = "..."``/``exclude = "..."``) that match none of ``names``."""
        out = []
        for key, globs in (("include", self.include or ()), ("exclude", self.exclude)):
            out += [
                f"{key} = {glob!r}"
                for glob in globs
                if not any(fnmatchcase(name, glob) for name in names)
            ]
        return out

    def select(self, names: list[str]) -> list[str]:
        """The names that pass, in order; a warning is logged for each glob matching nothing.

        Args:
            names: every name the source offers (before filtering).

        Returns:
            The kept names.

        """
        for problem in self.unmatched(names):
            logger.warning(
                "tool filter of %s: %s matches none of its tools (%s)",
                self.source,
                problem,
                ", ".join(names) or "none",
            )
        return [name for name in names if self.keeps(name)]

    def to_json(self) -> dict[str, Any]:
        """``{"source", "include", "exclude"}`` as it enters the descriptor."""
        return {
            "source": self.source,
            "include": list(self.include) if self.include is not None else None,
            "exclude": list(self.exclude),
        }
