"""The one table from engine exceptions to normalized failures (pipes, Celery, Redis, Temporal).

A backend translates what its engine raises **at the boundary**, through
:data:`ENGINE_FAILURES` and :func:`rule_for` only, so the same exception means the same
``kind``/``where``/``retryable`` whichever backend met it. Entries are keyed by the
exception class's qualified name (``module.QualName``), so this module imports no
engine (Celery stays optional); :func:`rule_for` walks the exception's MRO and the
most specific entry wins (the way starlette picks an exception handler). A test
checks that every exception class the engines define resolves to an entry, as httpx
checks ``map_httpcore_exceptions``.

The backend still writes the message (it knows the task id and which endpoint, broker
or result backend, was being talked to); the table decides what the failure *is*.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolproof.failures import FailureKind, FailureWhere

__all__ = ["ENGINE_FAILURES", "FailureRule", "qualified_name", "rule_for"]


@dataclass(frozen=True)
class FailureRule:
    """What an engine exception becomes.

    Attributes:
        kind: the :class:`~toolproof.contract.tools.ToolFailure` kind.
        where: the failure's ``where``.
        retryable: whether the same call may succeed if tried again.
        meaning: a short phrase for messages (``"unreachable"``, ``"lost"``).

    """

    kind: FailureKind
    where: FailureWhere
    retryable: bool
    meaning: str


_UNAVAILABLE = FailureRule(FailureKind.UNAVAILABLE, FailureWhere.BACKEND, True, "unreachable")
_ENGINE = FailureRule(FailureKind.BACKEND, FailureWhere.BACKEND, False, "failed")
_WORKER_ENGINE = FailureRule(
    FailureKind.BACKEND, FailureWhere.WORKER, False, "failed on the worker"
)
_LOST = FailureRule(FailureKind.WORKER, FailureWhere.WORKER, True, "lost")
_TIME_LIMIT = FailureRule(
    FailureKind.TIMEOUT, FailureWhere.WORKER, True, "stopped at its time limit"
)
_REVOKED = FailureRule(FailureKind.CANCELLED, FailureWhere.BACKEND, True, "revoked or expired")
_CANCELLED = FailureRule(FailureKind.CANCELLED, FailureWhere.BACKEND, False, "was cancelled")
_NO_RESULT = FailureRule(FailureKind.TIMEOUT, FailureWhere.BACKEND, True, "gave no result in time")

ENGINE_FAILURES: dict[str, FailureRule] = {
    # pipes and sockets (the process backend, and every engine's transport)
    "builtins.BrokenPipeError": FailureRule(
        FailureKind.WORKER, FailureWhere.WORKER, True, "pipe closed"
    ),
    "builtins.ConnectionError": _UNAVAILABLE,
    "builtins.TimeoutError": _UNAVAILABLE,
    "builtins.OSError": FailureRule(FailureKind.BACKEND, FailureWhere.BACKEND, True, "I/O failed"),
    "toolproof.errors.ProtocolError": FailureRule(
        FailureKind.BACKEND, FailureWhere.WORKER, True, "broke the relocation protocol"
    ),
    # Celery and its process pool (billiard)
    "billiard.exceptions.WorkerLostError": _LOST,
    "billiard.exceptions.Terminated": _LOST,
    "billiard.exceptions.TimeLimitExceeded": _TIME_LIMIT,
    "billiard.exceptions.SoftTimeLimitExceeded": _TIME_LIMIT,
    "billiard.exceptions.RestartFreqExceeded": _WORKER_ENGINE,
    "billiard.exceptions.CoroStop": _WORKER_ENGINE,
    "celery.exceptions.TaskRevokedError": _REVOKED,
    "celery.exceptions.TimeoutError": _NO_RESULT,
    "celery.exceptions.BackendError": _UNAVAILABLE,
    "celery.exceptions.WorkerShutdown": _LOST,
    "celery.exceptions.WorkerTerminate": _LOST,
    "celery.exceptions.CeleryError": _WORKER_ENGINE,
    "celery.exceptions.TaskPredicate": _WORKER_ENGINE,
    "celery.exceptions.CeleryWarning": _ENGINE,
    "celery.exceptions.CeleryCommandException": _ENGINE,
    "celery.exceptions.CDeprecationWarning": _ENGINE,
    "celery.exceptions.CPendingDeprecationWarning": _ENGINE,
    # kombu and py-amqp (the broker transports)
    "kombu.exceptions.OperationalError": _UNAVAILABLE,
    "kombu.exceptions.KombuError": _ENGINE,
    "kombu.exceptions.HttpError": _UNAVAILABLE,
    "amqp.exceptions.ConnectionError": _UNAVAILABLE,
    "amqp.exceptions.MessageNacked": _UNAVAILABLE,
    "amqp.exceptions.AMQPError": _ENGINE,
    "amqp.exceptions.AMQPDeprecationWarning": _ENGINE,
    # Redis (broker and result backend)
    "redis.exceptions.ConnectionError": _UNAVAILABLE,
    "redis.exceptions.TimeoutError": _UNAVAILABLE,
    "redis.exceptions.BusyLoadingError": _UNAVAILABLE,
    "redis.exceptions.MasterDownError": _UNAVAILABLE,
    "redis.exceptions.TryAgainError": _UNAVAILABLE,
    "redis.exceptions.ClusterDownError": _UNAVAILABLE,
    "redis.exceptions.RedisError": _ENGINE,
    "redis.exceptions.RedisClusterException": _ENGINE,
    "redis.exceptions.ChildDeadlockedError": _ENGINE,
    "redis.exceptions.IncorrectPolicyType": _ENGINE,
    # Temporal (temporalio: the frontend, and the failure a workflow's activity ended with)
    "temporalio.service.RPCError": _UNAVAILABLE,
    "temporalio.exceptions.TimeoutError": FailureRule(
        FailureKind.TIMEOUT, FailureWhere.BACKEND, True, "timed out"
    ),
    "temporalio.exceptions.CancelledError": _CANCELLED,
    "temporalio.exceptions.TerminatedError": _CANCELLED,
    "temporalio.exceptions.TemporalError": _WORKER_ENGINE,
}
"""Engine exception (``module.QualName``) -> :class:`FailureRule`; the most specific wins."""


def qualified_name(cls: type[BaseException]) -> str:
    """``module.QualName`` of an exception class (the key of :data:`ENGINE_FAILURES`)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def rule_for(error: BaseException) -> FailureRule | None:
    """The rule of the most specific class in ``error``'s MRO that has one, else ``None``.

    ``None`` means the exception is no engine failure (a programming error), which
    the backend lets propagate.
    """
    for cls in type(error).__mro__:
        rule = ENGINE_FAILURES.get(qualified_name(cls))
        if rule is not None:
            return rule
    return None
