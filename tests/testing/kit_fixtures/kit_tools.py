"""Tools for the kit's tests: a well-behaved one, and ones that break a rule each."""

from __future__ import annotations

from toolproof import Tool


async def shelf(item: str) -> str:
    """The shelf an item is on.

    Args:
        item: the item.

    """
    if item == "kiwi":
        raise KeyError("no such item: kiwi")
    return {"apple": "A1"}.get(item, "B4")


async def polite(item: str) -> str:
    """Misbehaves: answers plausible text instead of failing."""
    try:
        return await shelf(item)
    except KeyError:
        return "on the usual shelf"


def good() -> Tool:
    """A well-behaved tool."""
    return Tool.from_function(shelf)


def unstable() -> Tool:
    """Misbehaves: its description depends on set order (PYTHONHASHSEED)."""
    words = ",".join({"alpha", "beta", "gamma", "delta", "epsilon"})
    return Tool.from_function(shelf, description=f"The shelf ({words}).")


def swallowing() -> Tool:
    """Misbehaves: a failure becomes text."""
    return Tool.from_function(polite)
