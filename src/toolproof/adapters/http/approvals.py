"""The HTTP approval channel: ``GET/POST /v1/approvals…`` over the approvals store.

A person lists the pending requests of the SQLite store the gated servers wait on
(``serve-api --approvals-store FILE``, the file ``[approvals] store`` names) and
approves, denies or approves with edited arguments. Every request needs a **named
approver token** (``serve-api --approvers FILE``, TOML ``NAME = "TOKEN"``); the
decision is recorded as taken by that name over channel ``http``. The runs API token
is not an approver token: it is refused here (401), as is a request without one,
through :func:`toolproof.errors.error_mapping` like every other error.

The store decides each request once: a request that is no longer pending answers
409. Edited arguments must have a canonical JSON form (422 otherwise); the gate
validates them against the tool's input schema again before the body runs, and an
edit that fails it denies the call.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from toolproof.adapters.http.guards import settings_of
from toolproof.adapters.http.problems import ApiProblem, Problem
from toolproof.adapters.http.settings import ApiSettings
from toolproof.adapters.http.tokens import named_bearer
from toolproof.errors import AuthenticationError, InputError
from toolproof.extensions.approvals.store import REQUEST_ID_RE, ApprovalStore, StoredRequest
from toolproof.identity import canonical_json, digest_json

__all__ = ["ApprovalPage", "ApprovalView", "DecideApproval", "approvals_router"]

CHANNEL = "http"
"""The channel an HTTP decision is recorded under."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No approver token (the runs token is not one)."},
    404: {"model": Problem, "description": "No approvals store, or no such request."},
    413: {"model": Problem, "description": "The request body is too large."},
    422: {"model": Problem, "description": "Invalid request id, parameters or body."},
}

RequestId = Annotated[
    str,
    PathParam(
        pattern=REQUEST_ID_RE,
        min_length=36,
        max_length=36,
        description="An approval request id: `apr_` and 32 lowercase hex digits.",
        examples=["apr_" + "0" * 32],
    ),
]


class ApprovalView(BaseModel):
    """One approval request as the store holds it (``toolproof approvals show --json``).

    Attributes:
        id: the request id (``apr_<32 hex>``, the handle of a deferred call).
        created_at: when it was asked (ISO 8601 UTC).
        deadline: when it is denied without a decision (ISO 8601 UTC).
        tool: the gated variant.
        fingerprint: that variant's descriptor fingerprint.
        arguments_digest: ``sha256:...`` of the canonical arguments asked for.
        arguments: the arguments asked for.
        call_id: the call that asked, or ``None`` outside a recorded run.
        rule: the matched ``[[approvals.rules]]`` entry, or ``None``.
        mode: ``wait`` or ``defer``.
        status: ``pending``, ``approved``, ``denied`` or ``consumed`` (the body ran).
        decision: ``approve``, ``deny`` or ``approve_with_edits`` once decided.
        who: who decided (for HTTP: the approver token's name).
        channel: ``callback``, ``cli``, ``http`` or ``fail-closed``.
        reason: the reason given.
        decided_at: when it was decided.
        approved_digest: digest of the arguments approved.
        approved_arguments: the edited arguments of ``approve_with_edits``.

    """

    id: str
    created_at: str
    deadline: str
    tool: str
    fingerprint: str
    arguments_digest: str
    arguments: dict[str, JsonValue]
    call_id: str | None
    rule: dict[str, JsonValue] | None
    mode: str
    status: Literal["pending", "approved", "denied", "consumed"]
    decision: str | None
    who: str | None
    channel: str | None
    reason: str | None
    decided_at: str | None
    approved_digest: str | None
    approved_arguments: dict[str, JsonValue] | None

    @classmethod
    def of(cls, row: StoredRequest) -> ApprovalView:
        """The view of a store row."""
        return cls.model_validate(row.to_json())


class ApprovalPage(BaseModel):
    """``GET /v1/approvals``: the requests of one status, oldest first."""

    approvals: list[ApprovalView]


class DecideApproval(BaseModel):
    """``POST /v1/approvals/{id}``: a person's decision.

    Attributes:
        decision: ``approve`` (the arguments as asked), ``deny``, or ``edit`` (approve
            running with ``arguments`` instead).
        arguments: the edited arguments; required with ``edit``, refused otherwise.
        reason: why (recorded in ``approval_decided``), at most 4096 characters.

    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny", "edit"]
    arguments: dict[str, JsonValue] | None = None
    reason: str = Field(default="", max_length=4096)

    @model_validator(mode="after")
    def _edit_has_arguments(self) -> DecideApproval:
        if self.decision == "edit" and self.arguments is None:
            raise ValueError("decision 'edit' needs the edited 'arguments'")
        if self.decision != "edit" and self.arguments is not None:
            raise ValueError(f"'arguments' go with decision 'edit', not {self.decision!r}")
        return self


def approver_of(request: Request) -> str:
    """The name of the approver token the request carries.

    Raises:
        AuthenticationError: no approver tokens are configured, or the request carries
            none of them (HTTP 401).

    """
    settings = settings_of(request)
    if not settings.approvers:
        raise AuthenticationError(
            "this server takes no approver tokens: start it with --approvers FILE "
            "(the runs API token cannot decide approvals)"
        )
    return named_bearer(request.headers.get("authorization"), settings.approvers)


def _store(settings: ApiSettings) -> ApprovalStore:
    if settings.approvals_store is None:
        raise ApiProblem(
            404,
            "approvals-not-configured",
            "this server has no approvals store: start it with --approvals-store FILE",
        )
    return ApprovalStore(settings.approvals_store)


async def _row(store: ApprovalStore, request_id: str) -> StoredRequest:
    row = await asyncio.to_thread(store.get, request_id)
    if row is None:
        raise ApiProblem(
            404, "approval-not-found", f"no approval request {request_id!r} in {store.path}"
        )
    return row


Approver = Annotated[str, Depends(approver_of)]
Settings = Annotated[ApiSettings, Depends(settings_of)]
approvals_router = APIRouter(prefix="/v1", tags=["approvals"])


@approvals_router.get("/approvals", responses=_ERRORS)
async def list_approvals(
    who: Approver,
    settings: Settings,
    status: Annotated[
        Literal["pending", "approved", "denied", "consumed", "all"],
        Query(description="Which requests: one status, or `all`."),
    ] = "pending",
) -> ApprovalPage:
    """The approval requests of the store, oldest first (default: the pending ones)."""
    store = _store(settings)
    rows = await asyncio.to_thread(store.list, status=None if status == "all" else status)
    return ApprovalPage(approvals=[ApprovalView.of(row) for row in rows])


@approvals_router.get("/approvals/{request_id}", responses=_ERRORS)
async def get_approval(request_id: RequestId, who: Approver, settings: Settings) -> ApprovalView:
    """One approval request: the tool, the exact arguments and their digest, its status."""
    return ApprovalView.of(await _row(_store(settings), request_id))


@approvals_router.post(
    "/approvals/{request_id}",
    responses={
        **_ERRORS,
        400: {"model": Problem, "description": "The body is not JSON."},
        409: {
            "model": Problem,
            "description": "The request is no longer pending, or its row was edited.",
        },
    },
)
async def decide_approval(
    request_id: RequestId, body: DecideApproval, who: Approver, settings: Settings
) -> ApprovalView:
    """Approve, deny or approve with edited arguments; recorded as the token's name.

    The approval is bound to the digest of the arguments it approves: the request's
    own (``approve``) or the edited ones (``edit``).
    """
    store = _store(settings)
    row = await _row(store, request_id)
    approved_digest: str | None = None
    if body.decision == "approve":
        approved_digest = row.arguments_digest
    elif body.arguments is not None:
        try:
            canonical_json(body.arguments)
        except InputError as exc:
            raise ApiProblem(
                422, "invalid-arguments", f"the edited arguments: {exc.message}"
            ) from None
        approved_digest = digest_json(body.arguments)
    try:
        decided = await asyncio.to_thread(
            store.decide,
            request_id,
            approve=body.decision != "deny",
            who=who,
            channel=CHANNEL,
            reason=body.reason,
            approved_digest=approved_digest,
            approved_arguments=body.arguments,
        )
    except InputError as exc:
        kind = "approval-row-edited" if exc.fields.get("rule") == "row integrity" else None
        raise ApiProblem(409, kind or "approval-decided", exc.message, request=request_id) from None
    return ApprovalView.of(decided)
