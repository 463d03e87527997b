"""What an approver sees and answers, and the per-call scope a runtime gives the gate.

The Python channel is a callback ``async approver(request) -> bool | Decision``
given to :func:`toolproof.load_toolset` or :func:`toolproof.record_session`.
``True``/``False`` approve/deny the arguments as they are; a :class:`Decision` can
also carry edited arguments (validated against the tool's input schema again) and
a reason. The runtime that makes a call (the executor, a session) tells the gate
the call's id and the session's approver through :func:`approval_scope`, a context
variable read only by the ``approve`` layer of that call (as
:func:`~toolproof.tools.observe.observe` collects what the layers report).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

__all__ = [
    "ApprovalRequest",
    "ApprovalScope",
    "Approver",
    "Decision",
    "approval_scope",
    "approver_name",
    "current_scope",
]


@dataclass(frozen=True)
class ApprovalRequest:
    """A gated call waiting for a person's decision.

    Attributes:
        tool: the gated variant (``delete_branch_approve``).
        arguments: a copy of the arguments asked for (changing it changes nothing).
        arguments_digest: ``sha256:...`` of their canonical JSON (RFC 8785).
        call_id: the call's id in the run (``call_<hex>``), ``None`` outside a run.
        rule: the matched ``[[approvals.rules]]`` entry (with ``index``), or ``None``
            when every call is gated.
        request_id: the id in the approvals store (``apr_<hex>``).
        fingerprint: the gated variant's descriptor fingerprint (``sha256:...``).

    """

    tool: str
    arguments: dict[str, Any]
    arguments_digest: str
    call_id: str | None
    rule: Mapping[str, Any] | None
    request_id: str
    fingerprint: str


@dataclass(frozen=True)
class Decision:
    """An approver's answer when ``True``/``False`` is not enough.

    Attributes:
        approved: approve (``True``) or deny (``False``).
        arguments: edited arguments to run with instead (approve-with-edits); they are
            validated against the tool's input schema, and an invalid edit denies the
            call. ``None``: the arguments as asked.
        reason: why, recorded in ``approval_decided``.

    Raises:
        ValueError: (on construction) edited arguments on a denial, or not an object.

    """

    approved: bool
    arguments: dict[str, Any] | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.arguments is not None and not self.approved:
            raise ValueError("Decision: edited arguments only with approved=True")
        if self.arguments is not None and type(self.arguments) is not dict:
            raise ValueError(
                f"Decision.arguments must be a JSON object, not {type(self.arguments).__name__}"
            )


Approver: TypeAlias = Callable[[ApprovalRequest], Awaitable["bool | Decision"]]
"""``async approver(request: ApprovalRequest) -> bool | Decision``."""


def approver_name(approver: Any) -> str:
    """Who a callback decision is recorded as: ``module.qualname`` of the callback."""
    module = getattr(approver, "__module__", None) or type(approver).__module__
    qualname = getattr(approver, "__qualname__", None) or type(approver).__qualname__
    return f"{module}.{qualname}"


class ApprovalScope(NamedTuple):
    """What the runtime making one call tells that call's ``approve`` layer.

    Immutable (a named tuple: one is built for every call a runtime makes).

    Attributes:
        call_id: the call's id in the run, or ``None``.
        approver: the session's approver callback (overrides the Toolset's), or ``None``.

    """

    call_id: str | None = None
    approver: Approver | None = None


_SCOPE: ContextVar[ApprovalScope | None] = ContextVar("toolproof_approval_scope", default=None)


def current_scope() -> ApprovalScope | None:
    """The scope of the call being made, or ``None`` outside a runtime."""
    return _SCOPE.get()


class _Scoped:
    """The context manager :func:`approval_scope` returns (a class: no generator frame)."""

    __slots__ = ("_token", "scope")

    def __init__(self, scope: ApprovalScope) -> None:
        self.scope = scope

    def __enter__(self) -> ApprovalScope:
        self._token = _SCOPE.set(self.scope)
        return self.scope

    def __exit__(self, *exc_info: object) -> None:
        _SCOPE.reset(self._token)


def approval_scope(
    call_id: str | None = None, approver: Approver | None = None
) -> AbstractContextManager[ApprovalScope]:
    """Make ``call_id`` and ``approver`` known to the ``approve`` layers of the block's call.

    Returns:
        A context manager whose ``__enter__`` sets and gives the :class:`ApprovalScope`
        for the block (``with approval_scope(call_id, approver):``); not reentrant.

    """
    return _Scoped(ApprovalScope(call_id, approver))
