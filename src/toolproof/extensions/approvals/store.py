"""The approvals store: one SQLite row per request, shared by every process that decides.

The file is opened in WAL mode (``PRAGMA journal_mode=WAL``) so a waiting server
and a deciding CLI read and write it concurrently; each operation opens its own
connection (any thread, any process) and every change is one transaction. A row
goes ``pending`` -> ``approved`` | ``denied``, and an approved row -> ``consumed``
when the body runs with it (exactly once). A decision is written only on a
``pending`` row, so two deciders never both win.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from toolproof.errors import InputError
from toolproof.identity import canonical_json, digest_json

__all__ = ["REQUEST_ID_RE", "ApprovalStore", "StoredRequest", "new_request_id", "utc_now"]

REQUEST_ID_RE = r"^apr_[0-9a-f]{32}$"
"""What a request id (the handle of a deferred call) looks like."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approval_requests (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    deadline REAL NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    call_id TEXT,
    rule TEXT,
    mode TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
    decision TEXT,
    who TEXT,
    channel TEXT,
    reason TEXT,
    decided_at TEXT,
    approved_digest TEXT,
    approved_arguments TEXT
)
"""

_COLUMNS = (
    "id, created_at, deadline, tool, fingerprint, arguments_digest, arguments, call_id, rule, "
    "mode, status, decision, who, channel, reason, decided_at, approved_digest, approved_arguments"
)

Status = Literal["pending", "approved", "denied", "consumed"]


def new_request_id() -> str:
    """A fresh request id, ``apr_`` and 128 random bits in hex."""
    return "apr_" + secrets.token_hex(16)


def utc_now() -> str:
    """Now, ISO 8601 UTC with milliseconds."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class StoredRequest:
    """One row of the store.

    Attributes:
        id: the request id (``apr_<hex>``).
        created_at: when it was asked (ISO 8601 UTC).
        deadline: epoch seconds after which no decision is taken (denied).
        tool: the gated variant's name.
        fingerprint: that variant's descriptor fingerprint.
        arguments_digest: ``sha256:...`` of the canonical arguments asked for.
        arguments: the arguments asked for.
        call_id: the call that asked (``None`` outside a recorded run).
        rule: the matched rule record, or ``None`` (every call gated).
        mode: ``wait`` or ``defer``.
        status: ``pending``, ``approved``, ``denied`` or ``consumed``.
        decision: ``approve``, ``deny``, ``approve_with_edits`` once decided.
        who: who decided.
        channel: ``callback``, ``cli``, ``http`` or ``fail-closed``.
        reason: the reason given.
        decided_at: when it was decided (ISO 8601 UTC).
        approved_digest: digest of the arguments approved (edited or not).
        approved_arguments: the edited arguments of ``approve_with_edits``.

    """

    id: str
    created_at: str
    deadline: float
    tool: str
    fingerprint: str
    arguments_digest: str
    arguments: dict[str, Any]
    call_id: str | None
    rule: dict[str, Any] | None
    mode: str
    status: Status
    decision: str | None = None
    who: str | None = None
    channel: str | None = None
    reason: str | None = None
    decided_at: str | None = None
    approved_digest: str | None = None
    approved_arguments: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StoredRequest:
        """Build from a ``SELECT`` of every column, in table order."""
        values = list(row)
        values[6] = json.loads(values[6])
        values[8] = json.loads(values[8]) if values[8] is not None else None
        values[17] = json.loads(values[17]) if values[17] is not None else None
        return cls(*values)

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON (what ``toolproof approvals show --json`` prints)."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "deadline": datetime.fromtimestamp(self.deadline, UTC).isoformat(
                timespec="milliseconds"
            ),
            "tool": self.tool,
            "fingerprint": self.fingerprint,
            "arguments_digest": self.arguments_digest,
            "arguments": self.arguments,
            "call_id": self.call_id,
            "rule": self.rule,
            "mode": self.mode,
            "status": self.status,
            "decision": self.decision,
            "who": self.who,
            "channel": self.channel,
            "reason": self.reason,
            "decided_at": self.decided_at,
            "approved_digest": self.approved_digest,
            "approved_arguments": self.approved_arguments,
        }


def _timeout_reason(deadline: float, created_at: str) -> str:
    seconds = round(deadline - datetime.fromisoformat(created_at).timestamp(), 2)
    return f"no decision within {seconds:g} s (timeout)"


def _text(value: Any) -> str | None:
    return None if value is None else canonical_json(value).decode("utf-8")


class ApprovalStore:
    """The SQLite file of approval requests (see the module docstring).

    Args:
        path: the file; its folder is created on first write.
        busy_timeout: seconds an operation waits for another process's write lock.

    Every method raises :class:`sqlite3.Error` or :class:`OSError` when the file cannot
    be opened, read or written; the ``approve`` wrapper treats that as a denial.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._ready = False

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            if not self._ready:
                self._prepare(db)
            db.execute("PRAGMA synchronous=FULL")
            yield db
        finally:
            db.close()

    def _prepare(self, db: sqlite3.Connection) -> None:
        """Switch the file to WAL and create the table, waiting out another opener.

        SQLite answers ``PRAGMA journal_mode=WAL`` with ``SQLITE_BUSY`` at once, without
        calling the busy handler, while another connection is creating or switching the
        same file (https://www.sqlite.org/wal.html#activating_and_configuring_wal_mode
        needs an exclusive lock). Two processes (a waiting server and ``toolproof
        approve``) opening a new store together would then fail one of them with
        "database is locked"; this retries that step until ``busy_timeout`` has passed.

        Raises:
            sqlite3.OperationalError: still locked after ``busy_timeout`` seconds, or
                any other SQLite error at once.

        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(_SCHEMA)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
                continue
            self._ready = True
            return

    def create(
        self,
        *,
        tool: str,
        fingerprint: str,
        arguments_digest: str,
        arguments: dict[str, Any],
        call_id: str | None,
        rule: dict[str, Any] | None,
        mode: str,
        timeout_seconds: float,
    ) -> StoredRequest:
        """Insert a new ``pending`` request; return it (its id is fresh)."""
        request_id = new_request_id()
        now = time.time()
        created = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        deadline = now + timeout_seconds
        with self._connect() as db:
            db.execute(
                f"INSERT INTO approval_requests ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "'pending', NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
                (
                    request_id,
                    created,
                    deadline,
                    tool,
                    fingerprint,
                    arguments_digest,
                    _text(arguments),
                    call_id,
                    _text(rule),
                    mode,
                ),
            )
        return StoredRequest(
            request_id,
            created,
            deadline,
            tool,
            fingerprint,
            arguments_digest,
            arguments,
            call_id,
            rule,
            mode,
            "pending",
        )

    def get(self, request_id: str) -> StoredRequest | None:
        """The request ``request_id``, or ``None``."""
        with self._connect() as db:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM approval_requests WHERE id = ?", (request_id,)
            ).fetchone()
        return None if row is None else StoredRequest.from_row(row)

    def require(self, request_id: str) -> StoredRequest:
        """The request ``request_id``.

        Raises:
            InputError: no such request in this store.

        """
        found = self.get(request_id)
        if found is None:
            raise InputError(
                f"no approval request {request_id!r} in {self.path}",
                path=str(self.path),
                rule="request id",
            )
        return found

    def list(self, *, status: str | None = "pending") -> list[StoredRequest]:
        """Requests by creation time; ``status=None``: all of them."""
        with self._connect() as db:
            if status is None:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM approval_requests ORDER BY created_at, id"
                ).fetchall()
            else:
                rows = db.execute(
                    f"SELECT {_COLUMNS} FROM approval_requests WHERE status = ? "
                    "ORDER BY created_at, id",
                    (status,),
                ).fetchall()
        return [StoredRequest.from_row(row) for row in rows]

    def decide(
        self,
        request_id: str,
        *,
        approve: bool,
        who: str,
        channel: str,
        reason: str = "",
        approved_digest: str | None = None,
        approved_arguments: dict[str, Any] | None = None,
        enforce_deadline: bool = True,
    ) -> StoredRequest:
        """Write the decision on a ``pending`` request, in one transaction.

        Args:
            request_id: the request.
            approve: approve (``approved_digest`` required) or deny.
            who: who decided.
            channel: ``callback``, ``cli``, ``http`` or ``fail-closed``.
            reason: why (optional).
            approved_digest: digest of the arguments approved (the request's own, or
                the edited ones').
            approved_arguments: edited arguments (``approve_with_edits``), else ``None``.
            enforce_deadline: a request past its deadline is denied (``fail-closed``,
                timeout) instead of decided; the callback channel, bounded by its own
                timeout, turns this off.

        Returns:
            The decided row.

        Raises:
            InputError: no such request, or it is no longer pending (``rule`` says its
                status: it was decided already, or it timed out); or an approval of the
                asked arguments whose row's ``arguments`` do not digest to its
                ``arguments_digest`` (the file was edited: what a person reads is not
                what would run; ``rule`` ``row integrity``).

        """
        if approve and approved_digest is None:
            raise ValueError("an approval needs the digest of the arguments it approves")
        if approve and approved_arguments is None:
            row = self.require(request_id)
            shown = digest_json(row.arguments)
            if shown != row.arguments_digest or approved_digest != shown:
                raise InputError(
                    f"approval request {request_id!r} cannot be approved as asked: its "
                    f"arguments digest to {shown}, but the row records {row.arguments_digest} "
                    f"and the approval names {approved_digest} (rule: an approval names the "
                    "digest of the arguments a person was shown; was the store edited?)",
                    path=str(self.path),
                    rule="row integrity",
                )
        if approved_arguments is not None:
            decision = "approve_with_edits"
        else:
            decision = "approve" if approve else "deny"
        status = "approved" if approve else "denied"
        if enforce_deadline:
            self.expire(request_id)
        with self._connect() as db:
            changed = db.execute(
                "UPDATE approval_requests SET status = ?, decision = ?, who = ?, channel = ?, "
                "reason = ?, decided_at = ?, approved_digest = ?, approved_arguments = ? "
                "WHERE id = ? AND status = 'pending'",
                (
                    status,
                    decision,
                    who,
                    channel,
                    reason,
                    utc_now(),
                    approved_digest if approve else None,
                    _text(approved_arguments),
                    request_id,
                ),
            ).rowcount
        row = self.require(request_id)
        if not changed:
            how = f" ({row.reason})" if row.channel == "fail-closed" and row.reason else ""
            raise InputError(
                f"approval request {request_id!r} is {row.status}{how}, not pending "
                "(rule: a request is decided once, before its deadline)",
                rule="decided once",
            )
        return row

    def expire(self, request_id: str, *, now: float | None = None) -> bool:
        """Deny a ``pending`` request whose deadline has passed (fail closed, ``toolproof``).

        Returns:
            Whether it was expired now.

        """
        moment = time.time() if now is None else now
        with self._connect() as db:
            row = db.execute(
                "SELECT deadline, created_at FROM approval_requests "
                "WHERE id = ? AND status = 'pending'",
                (request_id,),
            ).fetchone()
            if row is None or row[0] >= moment:
                return False
            changed = db.execute(
                "UPDATE approval_requests SET status = 'denied', decision = 'deny', "
                "who = 'toolproof', channel = 'fail-closed', reason = ?, decided_at = ? "
                "WHERE id = ? AND status = 'pending'",
                (_timeout_reason(row[0], row[1]), utc_now(), request_id),
            ).rowcount
        return bool(changed)

    def consume(self, request_id: str) -> bool:
        """Mark an ``approved`` request ``consumed``; ``False`` when it was not approved."""
        with self._connect() as db:
            changed = db.execute(
                "UPDATE approval_requests SET status = 'consumed' "
                "WHERE id = ? AND status = 'approved'",
                (request_id,),
            ).rowcount
        return bool(changed)
