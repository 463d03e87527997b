"""Deterministic tools for the tool-evidence example: a tiny inventory ledger."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

import toolproof

_STOCK = {
    "apple": {
        "count": 12,
        "shelf": "A1",
        "note": "Apples arrived on Monday from the north orchard.",
    },
    "pear": {"count": 0, "shelf": "A2", "note": "Pears are sold out until the next delivery."},
    "plum": {"count": 7, "shelf": "B4", "note": "Plums are kept cold on shelf B4."},
}


class StockLine(BaseModel):
    """One line of the stock report."""

    item: str
    count: int
    shelf: str
    note: str


@toolproof.tool(read_only=True, idempotent=True, open_world=False)
def stock(item: Literal["apple", "pear", "plum"]) -> StockLine:
    """Look up how many of an item are in stock, and where.

    Args:
        item: the item to look up.
    """
    line = _STOCK[item]
    return StockLine(
        item=item, count=int(line["count"]), shelf=str(line["shelf"]), note=str(line["note"])
    )


@toolproof.tool(read_only=True, idempotent=True, open_world=False)
async def total(items: list[str]) -> int:
    """Count the items in stock across several item names.

    Args:
        items: the item names; unknown names count zero.
    """
    return sum(int(_STOCK[item]["count"]) if item in _STOCK else 0 for item in items)
