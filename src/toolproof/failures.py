"""The failure vocabulary: every ``ToolFailure.kind`` and ``where`` toolproof produces.

A failed call is a value (:class:`toolproof.contract.tools.ToolFailure`), not an
exception; :class:`FailureKind` is the closed set of what can fail and
:data:`FAILURE_TABLE` the one place that says, for each kind, what it means, whether
the ``retry`` wrapper retries it by default, and how it is reported when it escapes
as a :class:`toolproof.errors.ToolCallError` (``ToolResult.unwrap()``): the HTTP status
and MCP error code that :func:`toolproof.errors.error_mapping` gives it. Through
``toolproof serve`` a failed ``tools/call`` is always answered as a result with
``isError: true``, the text ``<kind>: <message>`` and the failure under
``_meta["toolproof/failure"]``. A failure's own ``retryable`` field is the site's
judgement of that one call (an HTTP 429 or 5xx is, a 4xx is not).

Both enums are ``StrEnum``: a member equals, hashes and formats as its string, and
every JSON form (trace lines, MCP ``_meta``, ``--json``) holds the plain string.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeAlias

__all__ = [
    "FAILURE_TABLE",
    "FailureKind",
    "FailureKindName",
    "FailureMapping",
    "FailureWhere",
    "FailureWhereName",
    "retried_kinds",
]


class FailureKind(StrEnum):
    """What failed; :data:`FAILURE_TABLE` documents each kind."""

    INVALID_ARGUMENTS = "invalid_arguments"
    TOOL_ERROR = "tool_error"
    INVALID_RESULT = "invalid_result"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    WORKER = "worker"
    TRANSPORT = "transport"
    BACKEND = "backend"
    UNAVAILABLE = "unavailable"
    RATE_LIMITED = "rate_limited"
    REFUSED = "refused"
    DESCRIPTOR_MISMATCH = "descriptor_mismatch"
    APPROVAL_PENDING = "approval_pending"
    APPROVAL_DENIED = "approval_denied"
    DENIED_BY_POLICY = "denied_by_policy"
    DENIED_BY_SANDBOX = "denied_by_sandbox"
    UNKNOWN_TOOL = "unknown_tool"
    UNRECORDABLE = "unrecordable"
    UNRECORDED = "unrecorded"
    CASSETTE_MISS = "cassette_miss"
    OUTCOME_UNKNOWN = "outcome_unknown"


class FailureWhere(StrEnum):
    """Where a call failed."""

    ARGUMENTS = "arguments"
    """Before the body: the arguments were refused."""
    BODY = "body"
    """In the tool's body (or the MCP server or client that answers for it)."""
    OUTPUT = "output"
    """After the body: its value was refused (schema, JSON, canonical form)."""
    WRAPPER = "wrapper"
    """In an extension layer around the body (timeout, approval)."""
    WORKER = "worker"
    """In the worker process or Celery worker that ran the body."""
    BACKEND = "backend"
    """In the execution backend outside the body (pool, broker, result store)."""
    TRANSPORT = "transport"
    """On the way to an MCP server (its process or connection)."""
    TOOL = "tool"
    """At a model provider (its HTTP answer)."""
    RUNTIME = "runtime"
    """In the run or session around the call (budget, recording, replay)."""


FailureKindName: TypeAlias = Literal[
    "invalid_arguments",
    "tool_error",
    "invalid_result",
    "timeout",
    "cancelled",
    "worker",
    "transport",
    "backend",
    "unavailable",
    "rate_limited",
    "refused",
    "descriptor_mismatch",
    "approval_pending",
    "approval_denied",
    "denied_by_policy",
    "denied_by_sandbox",
    "unknown_tool",
    "unrecordable",
    "unrecorded",
    "cassette_miss",
    "outcome_unknown",
]
"""The values of :class:`FailureKind` as literal strings, which ``ToolResult.fail`` also
takes (a test holds the two equal)."""

FailureWhereName: TypeAlias = Literal[
    "arguments", "body", "output", "wrapper", "worker", "backend", "transport", "tool", "runtime"
]
"""The values of :class:`FailureWhere` as literal strings (a test holds the two equal)."""


@dataclass(frozen=True)
class FailureMapping:
    """What one failure kind means and how it is reported.

    Attributes:
        meaning: one line: what happened.
        retried: whether the ``retry`` wrapper retries the kind by default (its
            ``retry_on`` default is exactly these kinds).
        http_status: the HTTP status of a :class:`~toolproof.errors.ToolCallError`
            carrying the kind.
        mcp_code: its JSON-RPC error code (-32602 invalid params, -32603 internal).

    """

    meaning: str
    retried: bool
    http_status: int
    mcp_code: int


_PARAMS = -32602
_INTERNAL = -32603

# fmt: off
FAILURE_TABLE: dict[FailureKind, FailureMapping] = {
    FailureKind.INVALID_ARGUMENTS: FailureMapping(
        "the arguments break the input schema; the body did not run",
        retried=False,
        http_status=422,
        mcp_code=_PARAMS,
    ),
    FailureKind.TOOL_ERROR: FailureMapping(
        "the body raised, or the MCP server or provider answered an error",
        retried=True,
        http_status=502,
        mcp_code=_INTERNAL,
    ),
    FailureKind.INVALID_RESULT: FailureMapping(
        "the body's value breaks the output schema, JSON or a size limit",
        retried=False,
        http_status=502,
        mcp_code=_INTERNAL,
    ),
    FailureKind.TIMEOUT: FailureMapping(
        "no answer within the time limit (the body was cancelled or killed)",
        retried=True,
        http_status=504,
        mcp_code=_INTERNAL,
    ),
    FailureKind.CANCELLED: FailureMapping(
        "the call was given up (revoked, expired, or an MCP task cancelled) before it finished",
        retried=False,
        http_status=503,
        mcp_code=_INTERNAL,
    ),
    FailureKind.WORKER: FailureMapping(
        "the worker process running the body died or was lost",
        retried=True,
        http_status=503,
        mcp_code=_INTERNAL,
    ),
    FailureKind.TRANSPORT: FailureMapping(
        "the MCP server's process or connection failed",
        retried=True,
        http_status=502,
        mcp_code=_INTERNAL,
    ),
    FailureKind.BACKEND: FailureMapping(
        "the execution backend (pool, broker, result store) failed",
        retried=True,
        http_status=503,
        mcp_code=_INTERNAL,
    ),
    FailureKind.UNAVAILABLE: FailureMapping(
        "a needed service, capability, thread or key is not there now",
        retried=True,
        http_status=503,
        mcp_code=_INTERNAL,
    ),
    FailureKind.RATE_LIMITED: FailureMapping(
        "the model provider answered HTTP 429",
        retried=False,
        http_status=429,
        mcp_code=_INTERNAL,
    ),
    FailureKind.REFUSED: FailureMapping(
        "the model refused to answer (refusal or content filter)",
        retried=False,
        http_status=502,
        mcp_code=_INTERNAL,
    ),
    FailureKind.DESCRIPTOR_MISMATCH: FailureMapping(
        "caller and worker built different tools for one name",
        retried=False,
        http_status=409,
        mcp_code=_INTERNAL,
    ),
    FailureKind.APPROVAL_PENDING: FailureMapping(
        "the call waits for a human decision; retry it later",
        retried=False,
        http_status=409,
        mcp_code=_INTERNAL,
    ),
    FailureKind.APPROVAL_DENIED: FailureMapping(
        "the call was not approved; the body did not run",
        retried=False,
        http_status=403,
        mcp_code=_INTERNAL,
    ),
    FailureKind.DENIED_BY_POLICY: FailureMapping(
        "a [policy] Cedar policy set denied the call; the body did not run",
        retried=False,
        http_status=403,
        mcp_code=_INTERNAL,
    ),
    FailureKind.DENIED_BY_SANDBOX: FailureMapping(
        "the body broke a rule of its sandbox profile (egress, a write outside scratch)",
        retried=False,
        http_status=403,
        mcp_code=_INTERNAL,
    ),
    FailureKind.UNKNOWN_TOOL: FailureMapping(
        "no tool of that name in the session",
        retried=False,
        http_status=404,
        mcp_code=_PARAMS,
    ),
    FailureKind.UNRECORDABLE: FailureMapping(
        "the call cannot be recorded (disk full, no canonical form)",
        retried=False,
        http_status=507,
        mcp_code=_INTERNAL,
    ),
    FailureKind.UNRECORDED: FailureMapping(
        "frozen replay: the recording holds no such call",
        retried=False,
        http_status=409,
        mcp_code=_INTERNAL,
    ),
    FailureKind.CASSETTE_MISS: FailureMapping(
        "the cassette holds no such call",
        retried=False,
        http_status=409,
        mcp_code=_INTERNAL,
    ),
    FailureKind.OUTCOME_UNKNOWN: FailureMapping(
        "a resumed session: the call was cut before its result and may have acted; not re-run",
        retried=False,
        http_status=409,
        mcp_code=_INTERNAL,
    ),
}
# fmt: on
"""Every :class:`FailureKind`: meaning, retried by default, HTTP status, MCP code (a test
checks every kind is here and in docs/failures.md)."""


def retried_kinds() -> tuple[str, ...]:
    """The kinds the ``retry`` wrapper retries by default, in table order, as strings."""
    return tuple(kind.value for kind, mapping in FAILURE_TABLE.items() if mapping.retried)
