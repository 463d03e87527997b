"""What an approver sees and answers, and the per-call scope a runtime gives the gate.

The Python channel is a callback ``async approver(request) -> bool | Decision``
given to :func:`toolproof.load_toolset` or :func:`toolproof.record_session`.
``True``/``False`` approve/deny the arguments as they are; a :class:`Decision` can
also carry edited arguments (validated against the tool's input schema again) and
a reason. The runtime that makes a call (the executor, a session) tells the gate
the call's id and the session's approver when it makes the call
(:func:`~toolproof.tools.observe.observe`), the ``approve`` layer reads them with
:func:`~toolproof.tools.observe.current_call`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "ApprovalRequest",
    "Approver",
    "Decision",
    "approver_name",
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
