"""``Resources``: the typed per-Toolset registry of what its builders keep beside the tools.

A Toolset's composition root and extensions keep state that belongs to that Toolset
and ends with it: the config it was built from, the MCP servers' status, the lock
digest, a backend's client (a worker pool, a Celery app). Each entry is reached by
a :class:`ResourceKey` that carries its value's type (as ``aiohttp.web.AppKey`` does),
so a reader gets a typed value without a cast, and a client cache is one call::

    POOLS = ResourceKey[ProcessPool]("backends.process.pool")
    pool = toolset.resources.client(POOLS, settings, lambda: ProcessPool(...), pool.aclose)

The Toolset closes every client it holds when it closes (:meth:`Resources.client`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar, cast

__all__ = [
    "CONFIG_PATH",
    "FILTERS",
    "LOCK_DIGEST",
    "LOCK_DRIFT",
    "LOCK_PATH",
    "MCP_LIVE",
    "MCP_SERVERS",
    "RAW_CONFIG",
    "ResourceKey",
    "Resources",
]

T = TypeVar("T")


class ResourceKey(Generic[T]):
    """The typed name of one entry of :class:`Resources`.

    Args:
        name: a dotted name, unique in the process (``"config.path"``,
            ``"backends.process.pool"``), shown in ``repr`` and errors.

    Two keys are the same entry only when they are the same object.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ResourceKey({self.name!r})"


class Resources:
    """Typed entries and cached clients of one Toolset.

    Args:
        on_close: registers an async clean-up with the owning Toolset
            (:meth:`toolproof.tools.toolset.Toolset.on_close`); clients built by
            :meth:`client` are closed through it.

    """

    __slots__ = ("_clients", "_entries", "_on_close")

    def __init__(self, on_close: Callable[[Callable[[], Awaitable[None]]], None]) -> None:
        self._entries: dict[ResourceKey[Any], Any] = {}
        self._clients: dict[tuple[ResourceKey[Any], Hashable], Any] = {}
        self._on_close = on_close

    def __getitem__(self, key: ResourceKey[T]) -> T:
        """The value under ``key``.

        Raises:
            KeyError: nothing is stored under ``key`` (the message names it).

        """
        try:
            return cast("T", self._entries[key])
        except KeyError:
            raise KeyError(f"this Toolset holds no {key.name!r}") from None

    def __setitem__(self, key: ResourceKey[T], value: T) -> None:
        self._entries[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[ResourceKey[Any]]:
        return iter(self._entries)

    def get(self, key: ResourceKey[T], default: T | None = None) -> T | None:
        """The value under ``key``, or ``default`` when there is none."""
        return cast("T | None", self._entries.get(key, default))

    def setdefault(self, key: ResourceKey[T], create: Callable[[], T]) -> T:
        """The value under ``key``; when there is none, ``create()`` is stored and returned."""
        if key in self._entries:
            return cast("T", self._entries[key])
        value = self._entries[key] = create()
        return value

    def client(
        self,
        key: ResourceKey[T],
        settings: Hashable,
        create: Callable[[], T],
        close: Callable[[T], Awaitable[None]] | None = None,
    ) -> T:
        """The one client of kind ``key`` for ``settings`` in this Toolset, built on first use.

        Args:
            key: the kind of client (a worker pool, a Celery client, a backend).
            settings: what tells two clients of that kind apart (a hashable tuple).
            create: builds the client; called at most once per ``(key, settings)``.
            close: ``async (client) -> None``, run when the Toolset closes.

        Returns:
            The cached client.

        """
        slot = (key, settings)
        if slot in self._clients:
            return cast("T", self._clients[slot])
        value = self._clients[slot] = create()
        if close is not None:

            async def closing() -> None:
                await close(value)

            self._on_close(closing)
        return value

    def clients(self, key: ResourceKey[T]) -> list[T]:
        """Every client of kind ``key`` built so far, in the order they were built."""
        return [cast("T", value) for (kind, _), value in self._clients.items() if kind is key]

    def __repr__(self) -> str:
        names = sorted(key.name for key in self._entries)
        return f"Resources({names}, {len(self._clients)} clients)"


CONFIG_PATH = ResourceKey[str]("config.path")
"""The absolute path of the ``toolproof.toml`` the Toolset was built from."""

RAW_CONFIG = ResourceKey[dict[str, Any]]("config.raw")
"""The parsed TOML of that file, before validation."""

FILTERS = ResourceKey[list[dict[str, Any]]]("tools.filters")
"""The active include/exclude filters (``ToolFilter.to_json()``), in the descriptor."""

LOCK_DIGEST = ResourceKey[str]("lock.digest")
"""The digest of the ``toolproof.lock`` the base tools were checked against."""

LOCK_PATH = ResourceKey[str]("lock.path")
"""The path of that lock file."""

LOCK_DRIFT = ResourceKey[list[dict[str, Any]]]("lock.drift")
"""Every drift from the lock (``Drift.to_json()``), by tool name."""

MCP_SERVERS = ResourceKey[dict[str, dict[str, Any]]]("mcp.servers")
"""Per ``[[mcp]]`` server name: ``status``, ``server_info``, ``protocol_version``,
``transport``, ``names``, ``tools`` and the ``list_changed`` count."""

MCP_LIVE = ResourceKey[dict[str, Any]]("mcp.live")
"""Per ``[[mcp]]`` server name: its ``LiveGuard`` (re-checks ``list_changed`` live)."""
