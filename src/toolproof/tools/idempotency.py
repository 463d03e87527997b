"""Idempotency keys: one key per call of a session, the same for every attempt at it.

A tool that charges a card or sends a mail must not act twice when a call is retried
(the ``retry`` wrapper) or, later, when a session resumes after a crash. Each call a
recording session admits gets a key that names *that* call and nothing else::

    idem_ + hex(sha256(canonical_json({
        "session": SESSION,              # the session's id (runtime.json's session)
        "tool": NAME,                    # the tool or variant called
        "fingerprint": FINGERPRINT,      # its descriptor's fingerprint, "sha256:<hex>"
        "arguments_digest": DIGEST,      # "sha256:<hex>" of the arguments' canonical JSON
        "occurrence": N,                 # 1 for the first call of NAME with these
    })))                                 #   arguments in the session, 2 for the second...

``canonical_json`` is RFC 8785 (:func:`toolproof.identity.canonical_json`), the hash is
:mod:`hashlib`'s SHA-256. Nothing in it is random or read from a clock, so the same
session id and the same occurrence of the same call give the same key in any process:
a retry inside the call reuses it (the wrapper runs inside the call's scope), and a
session resumed under the same id gives each re-made call the key it had. An agent
that makes the same call again makes a new occurrence, with a new key.

A body reads the key of the call it runs for from its
:class:`~toolproof.tools.context.Context` (``context.idempotency_key``) or from
:func:`current_idempotency_key`; an imported MCP tool sends it to its server in the
request's ``params._meta`` under :data:`IDEMPOTENCY_META_KEY`. Outside a recording
session (a bare ``tool.call``, a plan run, ``serve`` without ``--record``) there is no
key: ``None``. A relocated call carries it to its worker
(:mod:`toolproof.backends.protocol`).
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from typing import Literal

from toolproof.contract.tools import ToolsetDescriptor, ToolSpec
from toolproof.identity import canonical_json, digest
from toolproof.tools.observe import current_call

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "KEY_PREFIX",
    "Occurrences",
    "SessionKeys",
    "arguments_digest",
    "current_idempotency_key",
    "idempotency_key",
    "repeatable",
]

IDEMPOTENCY_META_KEY = "io.toolproof/idempotency-key"
"""The ``params._meta`` key an imported MCP tool's ``tools/call`` carries the key under."""

KEY_PREFIX = "idem_"
"""What every key starts with; 64 lowercase hex digits follow."""


def idempotency_key(
    session: str, tool: str, fingerprint: str, arguments_digest: str, occurrence: int
) -> str:
    """The idempotency key of one call (the formula of the module docstring).

    Args:
        session: the session's id.
        tool: the name of the tool or variant called.
        fingerprint: its descriptor's fingerprint (``sha256:<hex>``).
        arguments_digest: ``sha256:<hex>`` of the arguments' canonical JSON
            (:func:`toolproof.identity.digest_json` of the arguments object).
        occurrence: which call of ``tool`` with these arguments in the session it is,
            from 1.

    Returns:
        ``idem_`` followed by 64 lowercase hex digits.

    Raises:
        ValueError: ``occurrence`` is not an ``int`` of at least 1.

    """
    if type(occurrence) is not int or occurrence < 1:
        raise ValueError(f"occurrence {occurrence!r} is not a count (rule: an int >= 1)")
    data = canonical_json(
        {
            "session": session,
            "tool": tool,
            "fingerprint": fingerprint,
            "arguments_digest": arguments_digest,
            "occurrence": occurrence,
        }
    )
    return KEY_PREFIX + hashlib.sha256(data).hexdigest()


def repeatable(
    specs: Iterable[ToolSpec],
) -> dict[str, Literal["read_only", "idempotent", "key"]]:
    """What each tool declares about running a call again (``ExecutionRuntime.repeatable``).

    Args:
        specs: the specs of a Toolset's tools and variants.

    Returns:
        ``{name: "read_only" | "idempotent" | "key"}``: the first of ``readOnlyHint``,
        ``idempotentHint`` and ``idempotency = "key"`` that the tool states; a tool
        stating none is left out (its calls must run at most once per key).

    """
    out: dict[str, Literal["read_only", "idempotent", "key"]] = {}
    for spec in specs:
        if spec.annotations.is_read_only:
            out[spec.name] = "read_only"
        elif spec.annotations.is_idempotent:
            out[spec.name] = "idempotent"
        elif spec.honours_key:
            out[spec.name] = "key"
    return out


_SETTLE_AFTER = 1 << 16
"""Distinct keys an :class:`Occurrences` table holds in a dict before it settles them
into its sorted array (bounds the dict, about 6 MB at most)."""


class _Table:
    """The occurrences of one tool (and fingerprint): recent keys in a dict, the rest sorted.

    A key is the first 64 bits of the arguments' digest, as an ``int``. ``recent`` maps
    the keys counted since the last :meth:`settle` to their counts; ``settled`` holds
    every key counted before it, once each, sorted (8 bytes a key); ``repeats`` the
    count of each settled key counted more than once.
    """

    __slots__ = ("recent", "repeats", "settled")

    def __init__(self) -> None:
        self.recent: dict[int, int] = {}
        self.settled = array("Q")
        self.repeats: dict[int, int] = {}

    def count(self, key: int) -> int:
        """How many times ``key`` was counted so far."""
        count = self.recent.get(key)
        if count is not None:
            return count
        settled = self.settled
        at = bisect_left(settled, key)
        if at < len(settled) and settled[at] == key:
            return self.repeats.get(key, 1)
        return 0

    def settle(self) -> None:
        """Move the recent keys into the sorted array (a merge: O(n) once per 65,536 keys)."""
        settled, repeats = self.settled, self.repeats
        new: list[int] = []
        for key, count in self.recent.items():
            at = bisect_left(settled, key)
            if not (at < len(settled) and settled[at] == key):
                new.append(key)
            if count > 1:
                repeats[key] = count
        new.sort()
        self.settled = array("Q", heapq.merge(settled, new))
        self.recent = {}


class Occurrences:
    """Counts the calls of a session by tool, fingerprint and arguments: their occurrence.

    :meth:`next` is called once per admitted call, in admission order; the n-th call of
    the same tool (same fingerprint) with the same canonical arguments gets ``n``.
    Arguments are told apart by the first 64 bits of their digest: two distinct
    arguments of one tool sharing them (odds about 3 in 10^8 for a million distinct
    calls) would number the second one's occurrences on from the first's. Its key stays
    distinct (the key hashes the whole digest) and every process counting the same calls
    in the same order numbers them alike, so a resume and ``verify`` agree with the
    recording.

    Memory: 8 bytes a distinct call in a sorted array (8 MB for a million), plus at most
    65,536 recent keys in a dict, and the count of each call made more than once.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], _Table] = {}

    @staticmethod
    def _key(arguments_digest: str) -> int:
        return int(arguments_digest.removeprefix("sha256:")[:16], 16)

    def peek(self, tool: str, fingerprint: str, arguments_digest: str) -> int:
        """The occurrence :meth:`next` would return now, without counting it."""
        table = self._seen.get((tool, fingerprint))
        return 1 if table is None else table.count(self._key(arguments_digest)) + 1

    def next(self, tool: str, fingerprint: str, arguments_digest: str) -> int:
        """Count one more call of ``tool`` with these arguments; return its occurrence (from 1).

        ``arguments_digest`` is ``sha256:<64 hex digits>`` (:func:`arguments_digest`).
        """
        table = self._seen.get((tool, fingerprint))
        if table is None:
            table = self._seen[(tool, fingerprint)] = _Table()
        key = self._key(arguments_digest)
        count = table.count(key) + 1
        table.recent[key] = count
        if len(table.recent) >= _SETTLE_AFTER:
            table.settle()
        return count


def arguments_digest(encoded: bytes) -> str:
    """``sha256:<hex>`` of an arguments object's canonical JSON ``encoded``."""
    return digest(encoded)


class SessionKeys:
    """The keys of one session's calls: its id, its tools' fingerprints, the occurrences.

    Args:
        session: the session's id.
        fingerprints: each tool's (and variant's) descriptor fingerprint, by name; a
            name not in it is keyed with the fingerprint ``""``.

    """

    __slots__ = ("_occurrences", "fingerprints", "session")

    def __init__(self, session: str, fingerprints: dict[str, str]) -> None:
        self.session = session
        self.fingerprints = fingerprints
        self._occurrences = Occurrences()

    @classmethod
    def of(cls, session: str, toolset: ToolsetDescriptor) -> SessionKeys:
        """The keys of session ``session`` over the tools (and variants) of ``toolset``."""
        return cls(session, {tool.name: tool.fingerprint for tool in toolset.tools})

    def peek(self, tool: str, encoded: bytes) -> str:
        """The key :meth:`key` would give the next call of ``tool`` now, without counting it."""
        fingerprint = self.fingerprints.get(tool, "")
        digest_ = arguments_digest(encoded)
        occurrence = self._occurrences.peek(tool, fingerprint, digest_)
        return idempotency_key(self.session, tool, fingerprint, digest_, occurrence)

    def count(self, tool: str, encoded: bytes) -> None:
        """Count one call of ``tool`` (canonical arguments ``encoded``) that already has its key.

        A resumed session counts each call it serves from its record (keyed when it was
        recorded), so a live call after them gets the occurrence it would have had.
        """
        self._occurrences.next(tool, self.fingerprints.get(tool, ""), arguments_digest(encoded))

    def key(self, tool: str, encoded: bytes) -> str:
        """The key of the next admitted call of ``tool``, arguments' canonical JSON ``encoded``.

        Call it once per admitted call, in admission order (it counts the occurrence).
        """
        fingerprint = self.fingerprints.get(tool, "")
        digest_ = arguments_digest(encoded)
        occurrence = self._occurrences.next(tool, fingerprint, digest_)
        return idempotency_key(self.session, tool, fingerprint, digest_, occurrence)


def current_idempotency_key() -> str | None:
    """The idempotency key of the call running now, or ``None`` (no recording session)."""
    scope = current_call()
    return None if scope is None else scope.idempotency_key
