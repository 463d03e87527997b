"""``cache``: serve repeated successful calls from memory or a SQLite file.

The key is the digest of the canonical JSON (RFC 8785) of the arguments together
with the inner tool's descriptor fingerprint, so a changed tool, schema or
extension config never serves an old entry. Only successes are cached.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal, Protocol, Self

from pydantic import Field, model_validator

from toolproof.contract.bounds import MAX_COUNT, Seconds
from toolproof.contract.tools import ToolResult
from toolproof.extensions.wrappers.common import (
    StrictConfig,
    base_dir,
    require_repeatable,
    wrapper_spec,
)
from toolproof.identity import canonical_json, digest_json
from toolproof.tools.tool import Tool

__all__ = ["CacheConfig", "MemoryStore", "SqliteStore", "cache_factory"]


class CacheConfig(StrictConfig):
    """Config of ``cache``.

    Attributes:
        ttl: seconds an entry stays valid; ``None``: until evicted.
        store: ``memory`` (per process) or ``sqlite`` (a file shared across runs).
        path: the SQLite file (relative to the config file), required for ``sqlite``.
        max_entries: capacity of the memory store (least recently used goes first).
        force: allow the cache on a tool marked neither read-only nor idempotent.

    """

    ttl: Seconds | None = None
    store: Literal["memory", "sqlite"] = "memory"
    path: str | None = None
    max_entries: int = Field(1024, ge=1, le=MAX_COUNT)
    force: bool = False

    @model_validator(mode="after")
    def _path_for_sqlite(self) -> Self:
        if (self.store == "sqlite") != (self.path is not None):
            raise ValueError("'path' is required with store = 'sqlite' and only with it")
        return self


class Store(Protocol):
    """Where cache entries live: JSON values by key with an absolute expiry (epoch seconds)."""

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """``(True, value)`` for a live entry, else ``(False, None)``."""
        ...

    def put(self, key: str, value: Any, expires: float | None) -> None:
        """Store ``value`` under ``key`` until ``expires`` (``None``: no expiry)."""
        ...


class MemoryStore:
    """An in-process LRU store of at most ``max_entries`` entries."""

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[str, tuple[float | None, bytes]] = OrderedDict()
        self._max = max_entries

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """See :class:`Store`."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires, data = entry
        if expires is not None and expires <= now:
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, json.loads(data)

    def put(self, key: str, value: Any, expires: float | None) -> None:
        """See :class:`Store`; values are kept as canonical JSON bytes (no shared mutation)."""
        self._entries[key] = (expires, canonical_json(value))
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class SqliteStore:
    """Entries in a SQLite file (table ``toolproof_cache``), via :mod:`sqlite3`."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS toolproof_cache ("
            "key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL)"
        )

    def get(self, key: str, now: float) -> tuple[bool, Any]:
        """See :class:`Store`."""
        row = self._db.execute(
            "SELECT value, expires FROM toolproof_cache WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return False, None
        if row[1] is not None and row[1] <= now:
            self._db.execute("DELETE FROM toolproof_cache WHERE key = ?", (key,))
            return False, None
        return True, json.loads(row[0])

    def put(self, key: str, value: Any, expires: float | None) -> None:
        """See :class:`Store`."""
        self._db.execute(
            "INSERT OR REPLACE INTO toolproof_cache (key, value, expires) VALUES (?, ?, ?)",
            (key, canonical_json(value).decode("utf-8"), expires),
        )

    async def aclose(self) -> None:
        """Close the connection."""
        self._db.close()


def cache_factory(inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
    """Build the ``cache`` variant of ``inner``; see :class:`CacheConfig`.

    Raises:
        ExtensionError: the tool is neither read-only nor idempotent and ``force`` is off.

    """
    cfg: CacheConfig = config
    require_repeatable(inner, "cache", cfg.force)
    store: Store
    if cfg.store == "sqlite" and cfg.path is not None:
        sqlite_store = SqliteStore(base_dir(context) / cfg.path)
        toolset = getattr(context, "toolset", None)
        if toolset is not None:
            toolset.on_close(sqlite_store.aclose)
        store = sqlite_store
    else:
        store = MemoryStore(cfg.max_entries)
    fingerprint = inner.descriptor().fingerprint
    run = inner.run_validated
    ttl = cfg.ttl

    async def body(arguments: dict[str, Any]) -> ToolResult:
        key = digest_json({"tool": fingerprint, "arguments": arguments})
        now = time.time()
        hit, value = store.get(key, now)
        if hit:
            return ToolResult.success(value)
        result = await run(arguments)
        if result.ok:
            store.put(key, result.value, None if ttl is None else now + ttl)
        return result

    return Tool(wrapper_spec(inner, name), body)
