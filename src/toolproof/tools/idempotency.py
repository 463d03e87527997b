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


_KEY_BYTES = 16
"""Bytes of an arguments digest an occurrence is counted by: the first 128 bits of its
SHA-256 (two distinct arguments share them with odds of about 2^-128 a pair)."""


class Occurrences:
    """Counts the calls of a session by tool, fingerprint and arguments: their occurrence.

    :meth:`next` is called once per admitted call, in admission order; the n-th call of
    the same tool (same fingerprint) with the same canonical arguments gets ``n``.
    Memory: one dict per tool and fingerprint, one entry per distinct arguments, keyed
    by the first 16 bytes of their digest: about 90 bytes a distinct call (90 MB for a
    million; a tuple of the three strings per call took about 240 bytes).
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], dict[bytes, int]] = {}

    @staticmethod
    def _key(arguments_digest: str) -> bytes:
        return bytes.fromhex(arguments_digest.removeprefix("sha256:")[: 2 * _KEY_BYTES])

    def peek(self, tool: str, fingerprint: str, arguments_digest: str) -> int:
        """The occurrence :meth:`next` would return now, without counting it."""
        counts = self._seen.get((tool, fingerprint))
        return 1 if counts is None else counts.get(self._key(arguments_digest), 0) + 1

    def next(self, tool: str, fingerprint: str, arguments_digest: str) -> int:
        """Count one more call of ``tool`` with these arguments; return its occurrence (from 1)."""
        counts = self._seen.get((tool, fingerprint))
        if counts is None:
            counts = self._seen[(tool, fingerprint)] = {}
        key = self._key(arguments_digest)
        count = counts.get(key, 0) + 1
        counts[key] = count
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
