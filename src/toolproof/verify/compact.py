"""Compact stand-ins for the per-call ids a check keeps: keyed digests, not the strings."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

__all__ = ["KeySet", "Multiset", "compact_key"]

_KEYED = secrets.token_bytes(32)
"""This process's secret key for :func:`compact_key` (a trace cannot aim at its collisions)."""


def compact_key(text: str) -> int:
    """A 16-byte stand-in for ``text`` in a check's per-call set: its keyed BLAKE2b.

    The digest is keyed by a secret drawn once per process (:mod:`secrets`), so no trace
    can be written to make two of its ids collide; two distinct texts share a key with
    probability about ``n**2 / 2**129`` for ``n`` kept. As an ``int``: 44 bytes in
    memory, against about 118 for a ``call_<64 hex>`` id.
    """
    data = text.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=16, key=_KEYED).digest())


class KeySet:
    """A set of strings kept as :func:`compact_key` digests (about 70 bytes per entry).

    For the per-call sets of a check over one pass of the trace: the ids of calls,
    steps or keys seen, never the events' own strings.
    """

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._keys = {compact_key(text) for text in texts}

    def add(self, text: str) -> bool:
        """Add ``text``; whether it was new."""
        key = compact_key(text)
        if key in self._keys:
            return False
        self._keys.add(key)
        return True

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and compact_key(text) in self._keys

    def __len__(self) -> int:
        return len(self._keys)


class Multiset:
    """An order-free digest of a multiset of strings: the count and the sum of their keys.

    Two equal multisets have equal digests; two different ones have equal digests with
    probability about ``2**-128`` (the keys are :func:`compact_key`, secret to this
    process). Constant memory: for comparing two streams item by item without keeping
    either.
    """

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def add(self, text: str) -> None:
        """Count one ``text``."""
        self.count += 1
        self.total = (self.total + compact_key(text)) % (1 << 128)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Multiset):
            return NotImplemented
        return (self.count, self.total) == (other.count, other.total)

    __hash__ = None  # type: ignore[assignment]
