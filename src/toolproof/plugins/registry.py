"""A registry of one seam's plugins: the ones added in code, then the installed entry points.

The composition root (:mod:`toolproof.config`) builds one registry per seam and
passes it down to where the seam is used; nothing is registered by importing a
module, and there is no process-wide registry. A seam subclasses :class:`Registry`
to say what its entry points must be (:meth:`Registry.accept`).
"""

from __future__ import annotations

from typing import Generic, TypeVar, cast

from toolproof.errors import InputError
from toolproof.plugins.loading import ENTRY_POINT_GROUPS, load_entry_point

__all__ = ["REGISTERED", "Registry"]

T = TypeVar("T")

REGISTERED = "registered"
"""The origin of an item added in code (:meth:`Registry.register`)."""


class Registry(Generic[T]):
    """Items of one seam by name; a name not added in code is looked up among entry points.

    Args:
        kind: the seam, a key of :data:`~toolproof.plugins.loading.ENTRY_POINT_GROUPS`
            (``reasoner``, ``check``, ``retrieval``, ``runtime``).

    """

    def __init__(self, kind: str) -> None:
        if kind not in ENTRY_POINT_GROUPS:
            raise ValueError(f"unknown plugin kind {kind!r}")
        self.kind = kind
        self._items: dict[str, tuple[T, str]] = {}

    def accept(self, name: str, item: object, origin: str) -> T:
        """Check that an entry point's object is what this seam expects, and return it.

        The default accepts anything; a seam overrides it.

        Raises:
            InputError: the object is not usable (see
                :func:`~toolproof.plugins.loading.plugin_error`).

        """
        return cast(T, item)

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; adding the same object again is a no-op.

        Returns:
            ``item``.

        Raises:
            InputError: another item is registered under ``name`` (fields ``plugin``,
                ``kind``, ``rule``).

        """
        existing = self._items.get(name)
        if existing is not None and existing[0] is not item:
            raise InputError(
                f"{self.kind} name {name!r} is already registered",
                plugin=name,
                kind=self.kind,
                rule="unique",
            )
        self._items[name] = (item, REGISTERED)
        return item

    def find(self, name: str) -> tuple[T, str] | None:
        """The item named ``name`` and its origin; ``None`` when no code or entry point has it.

        An entry point is loaded (and checked by :meth:`accept`) on its first lookup
        and kept in this registry.

        Returns:
            ``(item, origin)``: origin ``registered`` or ``distribution:module:attr``.

        Raises:
            InputError: the entry point is declared twice, fails to load or is not
                what the seam expects.

        """
        found = self._items.get(name)
        if found is None:
            loaded = load_entry_point(self.kind, name)
            if loaded is None:
                return None
            item, origin = loaded
            found = self._items[name] = (self.accept(name, item, origin), origin)
        return found

    def require(self, name: str, unknown: str) -> tuple[T, str]:
        """The item named ``name`` and its origin, as :meth:`find`; refused when there is none.

        Args:
            name: the plugin's name.
            unknown: the whole message when no code or entry point has ``name``.

        Raises:
            InputError: ``unknown`` (fields ``plugin``, ``kind``, ``rule="unknown"``), or
                what :meth:`find` raises.

        """
        found = self.find(name)
        if found is None:
            raise InputError(unknown, plugin=name, kind=self.kind, rule="unknown")
        return found

    def names(self) -> list[str]:
        """The names added in code or looked up already, sorted (other entry points not listed)."""
        return sorted(self._items)
