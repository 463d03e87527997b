"""``approve``: ``t_approve`` asks a person before ``t`` runs (DESIGN §13, docs/approvals.md).

A call a rule gates (every call, without rules) gets a row in the approvals store
and an ``approval_requested`` event (call id, variant, descriptor fingerprint,
digest of the canonical arguments, matched rule) before anything runs; the decision
comes from the approver callback or from the store (``toolproof approvals``, HTTP)
and is recorded as ``approval_decided``. The body runs only with the arguments
whose digest was approved, once: the bytes are taken (RFC 8785) when the call asks,
and the body runs a fresh object decoded from them, never the caller's live
dictionary (which anyone holding it, the approver included, could change while the
decision is pending). No decision within ``timeout_seconds``, a store
that cannot be reached, an approver that raises or answers nonsense: denied
(failure kind ``approval_denied``, the body not run). In ``defer`` mode a call
without a decision fails at once with kind ``approval_pending`` and a handle; the
same call retried with ``approval_handle`` runs once the request is approved.

A call no rule gates reports ``approval_skipped`` (the variant and the rules that
could have gated it) and runs at once, so every call of the variant carries an
approval record the offline ``approvals`` check can re-evaluate. Requests and skips
also record the variant's validated config (``policy``): its digest is the
``config_digest`` of the ``approve`` layer in the runtime descriptor, which binds the
recorded rules to the variant.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolproof.contract.tools import ToolResult
from toolproof.errors import FOREIGN_CODE_ERRORS, InputError, foreign_failure
from toolproof.extensions.approvals.policy import ApprovalPolicy, CompiledRule, compile_rules
from toolproof.extensions.approvals.request import (
    ApprovalRequest,
    Approver,
    Decision,
    approver_name,
)
from toolproof.extensions.approvals.store import (
    REQUEST_ID_RE,
    ApprovalStore,
    StoredRequest,
    new_request_id,
    utc_now,
)
from toolproof.extensions.schema import is_flat_object_schema
from toolproof.extensions.wrappers.common import base_dir, wrapper_spec
from toolproof.identity import canonical_json, digest, digest_json
from toolproof.tools import hooks
from toolproof.tools.observe import current_call, note_approval
from toolproof.tools.tool import Tool

__all__ = ["APPROVE_RESERVED", "HANDLE_PARAM", "approve_factory"]

HANDLE_PARAM = "approval_handle"
"""The reserved param a deferred call is retried with."""

APPROVE_RESERVED = {
    HANDLE_PARAM: {
        "type": "string",
        "pattern": REQUEST_ID_RE,
        "description": (
            "Retry a call deferred for approval: the handle its approval_pending failure gave."
        ),
    }
}
"""The reserved param of ``approve``: ``approval_handle`` (``apr_<32 hex>``)."""

_POLL_FIRST, _POLL_MAX = 0.05, 0.5
"""Seconds between two reads of the store while a call waits (growing to the max)."""

_STORE_ERRORS = (OSError, sqlite3.Error)
"""What a store that cannot be opened, read or written raises."""

FAIL_CLOSED = "fail-closed"
"""The channel of a decision toolproof took itself: a denial (timeout, store, approver)."""


def _decoded(asked: bytes) -> dict[str, Any]:
    """A fresh arguments object decoded from the canonical bytes ``asked``."""
    fresh: dict[str, Any] = json.loads(asked)
    return fresh


class _Gate:
    """The slow path of one ``approve`` variant: store, channels, events."""

    def __init__(
        self,
        inner: Tool,
        name: str,
        policy: ApprovalPolicy,
        store: ApprovalStore,
        approver: Approver | None,
        fingerprint: Callable[[], str],
        run: Callable[[dict[str, Any]], Awaitable[ToolResult]],
    ) -> None:
        self.inner, self.name, self.policy, self.store = inner, name, policy, store
        self.approver, self.fingerprint, self.run = approver, fingerprint, run
        self.policy_json: dict[str, Any] = policy.model_dump(mode="json")

    def _denied(self, request: str, who: str, reason: str) -> ToolResult:
        return ToolResult.fail(
            "approval_denied",
            f"call to {self.name!r} not approved (request {request}, by {who}): {reason}; "
            "the body did not run",
            where="wrapper",
            detail={"request": request, "who": who, "reason": reason},
        )

    def _decided(
        self,
        request: str,
        decision: str,
        who: str,
        channel: str,
        reason: str,
        approved_digest: str | None = None,
        edited: dict[str, Any] | None = None,
        decided_at: str | None = None,
    ) -> None:
        note_approval(
            {
                "type": "approval_decided",
                "request": request,
                "decision": decision,
                "who": who,
                "channel": channel,
                "decided_at": decided_at or utc_now(),
                "reason": reason,
                "approved_digest": approved_digest,
                "edited_arguments": edited,
            }
        )

    def _fail_closed(self, request: str, reason: str) -> ToolResult:
        self._decided(request, "deny", "toolproof", FAIL_CLOSED, reason)
        return self._denied(request, "toolproof", reason)

    async def __call__(
        self, arguments: dict[str, Any], rule: CompiledRule | None, handle: str | None
    ) -> ToolResult:
        """Ask for, await and apply the decision on ``arguments``; run the body if approved.

        ``arguments`` is read once, here, before the first ``await``: its canonical
        bytes (RFC 8785) are what is digested, shown, approved and, decoded afresh, run.
        """
        asked = canonical_json(arguments)
        arguments = _decoded(asked)  # from here on nothing the caller holds is read
        digest_of = digest(asked)
        fingerprint = self.fingerprint()
        scope = current_call()
        call_id = scope.call_id if scope is not None else None
        approver = scope.approver if scope is not None and scope.approver else self.approver
        rule_record = dict(rule.record) if rule is not None else None
        try:
            if handle is not None:
                row = await asyncio.to_thread(self.store.get, handle)
            else:
                row = await asyncio.to_thread(
                    self.store.create,
                    tool=self.name,
                    fingerprint=fingerprint,
                    arguments_digest=digest_of,
                    arguments=arguments,
                    call_id=call_id,
                    rule=rule_record,
                    mode=self.policy.mode,
                    timeout_seconds=self.policy.timeout_seconds,
                )
        except (OSError, sqlite3.Error, ValueError, InputError) as exc:
            request = handle or new_request_id()
            self._requested(request, fingerprint, digest_of, rule_record)
            return self._fail_closed(
                request,
                f"the approvals store {self.store.path} cannot be used: {foreign_failure(exc)}",
            )
        if row is None or (row.tool, row.fingerprint, row.arguments_digest) != (
            self.name,
            fingerprint,
            digest_of,
        ):
            assert handle is not None
            why = (
                "no such request in the store"
                if row is None
                else "it was requested for another tool, descriptor or arguments"
            )
            return self._denied(handle, "toolproof", f"handle {handle}: {why}; it approves nothing")
        self._requested(row.id, fingerprint, digest_of, row.rule)
        decided: StoredRequest | ToolResult = row
        if row.status == "pending" and row.deadline <= time.time():
            decided = await self._expire(row)  # a deferred call retried too late
        elif row.status == "pending":
            if approver is None and self.policy.mode == "defer":
                return ToolResult.fail(
                    "approval_pending",
                    f"call to {self.name!r} waits for a decision on request {row.id} (store "
                    f"{self.store.path}); retry the same call with "
                    f"{HANDLE_PARAM}={row.id!r} once it is decided",
                    where="wrapper",
                    retryable=True,
                    detail={"handle": row.id, "store": str(self.store.path)},
                )
            decided = await self._awaited(approver, row, arguments, call_id)
        if isinstance(decided, ToolResult):
            return decided
        return await self._apply(decided, asked, digest_of, fingerprint)

    async def _awaited(
        self,
        approver: Approver | None,
        row: StoredRequest,
        arguments: dict[str, Any],
        call_id: str | None,
    ) -> StoredRequest | ToolResult:
        """Ask ``approver`` (or wait on the store) for a decision, as one approval-wait span.

        With telemetry on the wait is a span ``toolproof.approval.wait {variant}``
        (``toolproof.approval.request``, ``toolproof.approval.channel``, and once decided
        ``toolproof.approval.decision``, ``toolproof.call_id`` inside a run; a fail-closed
        end sets ``error.type``).
        """
        attributes: dict[str, str | int] = {
            "gen_ai.tool.name": self.name,
            "toolproof.approval.request": row.id,
            "toolproof.approval.channel": "callback" if approver is not None else "store",
        }
        if call_id is not None:
            attributes["toolproof.call_id"] = call_id
        with hooks.span(f"toolproof.approval.wait {self.name}", attributes) as span:
            if approver is not None:
                decided = await self._ask(approver, row, arguments)
            else:
                decided = await self._wait(row)
            if isinstance(decided, ToolResult):
                if decided.failure is not None:
                    hooks.fail(span, decided.failure.kind, decided.failure.message)
            elif decided.decision is not None:
                span.set_attribute("toolproof.approval.decision", decided.decision)
            return decided

    def _requested(
        self, request: str, fingerprint: str, digest: str, rule: dict[str, Any] | None
    ) -> None:
        note_approval(
            {
                "type": "approval_requested",
                "request": request,
                "tool": self.name,
                "fingerprint": fingerprint,
                "arguments_digest": digest,
                "rule": rule,
                "mode": self.policy.mode,
                "policy": self.policy_json,
            }
        )

    async def _ask(
        self, approver: Approver, row: StoredRequest, arguments: dict[str, Any]
    ) -> StoredRequest | ToolResult:
        request = ApprovalRequest(
            tool=self.name,
            arguments=_decoded(canonical_json(arguments)),
            arguments_digest=row.arguments_digest,
            call_id=row.call_id,
            rule=row.rule,
            request_id=row.id,
            fingerprint=row.fingerprint,
        )
        who = approver_name(approver)
        try:
            async with asyncio.timeout(self.policy.timeout_seconds):
                answer: Any = await approver(request)
        except TimeoutError:
            return await self._expire(row)
        except FOREIGN_CODE_ERRORS as exc:
            return await self._deny_in_store(
                row, f"the approver {who} raised: {foreign_failure(exc)}"
            )
        if type(answer) is bool:
            answer = Decision(answer)
        if not isinstance(answer, Decision):
            return await self._deny_in_store(
                row, f"the approver {who} answered {type(answer).__name__}, not bool or Decision"
            )
        approved_digest: str | None = row.arguments_digest if answer.approved else None
        edited = answer.arguments
        if edited is not None:
            refused = self._check_edit(edited)
            if refused is not None:
                return await self._deny_in_store(row, refused)
            approved_digest = digest_json(edited)
        try:
            return await asyncio.to_thread(
                self.store.decide,
                row.id,
                approve=answer.approved,
                who=who,
                channel="callback",
                reason=answer.reason,
                approved_digest=approved_digest,
                approved_arguments=edited,
                enforce_deadline=False,
            )
        except InputError as exc:
            if exc.fields.get("rule") == "row integrity":  # the row was edited: not these bytes
                return await self._deny_in_store(row, exc.message)
            return await self._reread(row)  # decided meanwhile elsewhere: that decision stands
        except _STORE_ERRORS as exc:
            return self._fail_closed(
                row.id, f"the decision could not be stored: {foreign_failure(exc)}"
            )

    def _check_edit(self, edited: dict[str, Any]) -> str | None:
        try:
            canonical_json(edited)
        except InputError as exc:
            return f"the edited arguments have no canonical JSON form: {exc.message}"
        refused = self.inner.check_arguments(edited)
        if refused is not None and refused.failure is not None:
            return f"the edited arguments fail the input schema: {refused.failure.message}"
        return None

    async def _reread(self, row: StoredRequest) -> StoredRequest | ToolResult:
        try:
            again = await asyncio.to_thread(self.store.get, row.id)
        except _STORE_ERRORS as exc:
            return self._fail_closed(row.id, f"the store cannot be read: {foreign_failure(exc)}")
        if again is None:
            return self._fail_closed(row.id, "the request vanished from the store")
        return again

    async def _deny_in_store(self, row: StoredRequest, reason: str) -> StoredRequest | ToolResult:
        try:
            return await asyncio.to_thread(
                self.store.decide,
                row.id,
                approve=False,
                who="toolproof",
                channel=FAIL_CLOSED,
                reason=reason,
                enforce_deadline=False,
            )
        except InputError:
            return await self._reread(row)
        except _STORE_ERRORS as exc:
            return self._fail_closed(
                row.id, f"{reason}; and the store failed: {foreign_failure(exc)}"
            )

    async def _expire(self, row: StoredRequest) -> StoredRequest | ToolResult:
        seconds = self.policy.timeout_seconds
        return await self._deny_in_store(row, f"no decision within {seconds:g} s (timeout)")

    async def _wait(self, row: StoredRequest) -> StoredRequest | ToolResult:
        loop = asyncio.get_running_loop()
        wall_deadline = loop.time() + max(0.0, row.deadline - time.time())
        interval = _POLL_FIRST
        while True:
            left = wall_deadline - loop.time()
            if left <= 0:
                return await self._expire(row)
            await asyncio.sleep(min(interval, left))
            interval = min(interval * 2, _POLL_MAX)
            current = await self._reread(row)
            if isinstance(current, ToolResult) or current.status != "pending":
                return current

    async def _apply(
        self, row: StoredRequest, asked: bytes, digest: str, fingerprint: str
    ) -> ToolResult:
        """Run the arguments ``asked`` (or the approved edit) once, if ``row`` approves them.

        ``asked`` is the canonical JSON (RFC 8785) of the call's arguments taken before
        it asked, and the body runs a fresh object decoded from exactly those bytes;
        ``row`` is the store's row as read after the decision; ``digest`` (of ``asked``)
        and ``fingerprint`` are this call's own. The row is trusted
        for nothing it could have changed meanwhile: a row that now names another tool,
        descriptor or argument digest (the file edited while the call waited) approves
        nothing, and the approved digest must be this call's (or the edit's).
        """
        decision = row.decision or "deny"
        who, channel = row.who or "toolproof", row.channel or FAIL_CLOSED
        reason = row.reason or ""
        if row.status == "consumed":
            return self._denied(row.id, who, "this request's approval was already used")
        if row.status == "denied":
            self._decided(row.id, "deny", who, channel, reason, decided_at=row.decided_at)
            return self._denied(row.id, who, reason or "denied")
        if row.status != "approved":
            return self._fail_closed(row.id, f"the request is {row.status}, not approved")
        if (row.tool, row.fingerprint, row.arguments_digest) != (self.name, fingerprint, digest):
            return self._fail_closed(
                row.id,
                "the store's row now names another tool, descriptor or arguments than this "
                f"call's ({self.name}, {fingerprint}, {digest}); it approves nothing",
            )
        edited = row.approved_arguments
        run_with = _decoded(asked) if edited is None else edited
        expected = digest if edited is None else digest_json(edited)
        if row.approved_digest != expected:
            return self._fail_closed(
                row.id,
                f"the decision approves {row.approved_digest}, not these arguments ({expected})",
            )
        if edited is not None:
            refused = self._check_edit(edited)
            if refused is not None:
                return self._fail_closed(row.id, refused)
        try:
            consumed = await asyncio.to_thread(self.store.consume, row.id)
        except _STORE_ERRORS as exc:
            return self._fail_closed(row.id, f"the store cannot be written: {foreign_failure(exc)}")
        if not consumed:
            return self._denied(row.id, who, "this request's approval was already used")
        self._decided(
            row.id,
            decision,
            who,
            channel,
            reason,
            approved_digest=row.approved_digest,
            edited=edited,
            decided_at=row.decided_at,
        )
        return await self.run(run_with)


def approve_factory(inner: Tool, *, name: str, config: Any, context: Any = None) -> Tool:
    """Build the ``approve`` variant of ``inner``; see the module docstring.

    Args:
        inner: the tool to gate.
        name: the variant's name (``<tool>_approve``).
        config: the :class:`ApprovalPolicy` (the ``[approvals]`` table by default).
        context: the apply context: ``base_dir`` (the store is relative to it),
            ``toolset`` (the variant's fingerprint) and ``approver`` (the callback of
            ``load_toolset(..., approver=)``).

    Returns:
        The variant; its schema is ``inner``'s plus ``approval_handle``.

    """
    policy: ApprovalPolicy = config
    rules = compile_rules(policy, inner.spec.annotations, inner.spec.input_schema)
    run = inner.run_validated if is_flat_object_schema(inner.spec.input_schema) else inner.call
    spec = wrapper_spec(inner, name, APPROVE_RESERVED)
    toolset = getattr(context, "toolset", None)
    cached: list[str] = []

    def fingerprint() -> str:
        if not cached:
            bound = toolset.get(name) if toolset is not None else None
            cached.append(
                bound.descriptor().fingerprint if bound is not None else digest_json(spec.to_json())
            )
        return cached[0]

    store = ApprovalStore(base_dir(context) / policy.store)
    gate = _Gate(inner, name, policy, store, getattr(context, "approver", None), fingerprint, run)

    skipped = {
        "type": "approval_skipped",
        "tool": name,
        "rules": [dict(rule.record) for rule in rules or ()],
        "policy": gate.policy_json,
    }

    async def body(arguments: dict[str, Any]) -> ToolResult:
        if HANDLE_PARAM in arguments:
            handle = arguments[HANDLE_PARAM]
            rest = {k: v for k, v in arguments.items() if k != HANDLE_PARAM}
            return await gate(rest, None, handle)
        if rules is None:
            return await gate(arguments, None, None)
        for rule in rules:
            if rule.matches(arguments):
                return await gate(arguments, rule, None)
        note_approval(skipped)
        return await run(arguments)

    return Tool(spec, body)
