"""The one table from engine exceptions to failures: every engine exception is mapped.

Like httpx's test of ``map_httpcore_exceptions``: every exception class the engines
define (Celery, billiard, kombu, py-amqp, Redis, the relocation protocol) resolves,
through its MRO, to a rule of :data:`ENGINE_FAILURES`; the ones a call meets map to
the precise kind the docs state.
"""

from __future__ import annotations

import inspect
from types import ModuleType

import amqp.exceptions
import billiard.exceptions
import celery.exceptions
import kombu.exceptions
import pytest
import redis.exceptions
import temporalio.exceptions
import temporalio.service

from toolproof.backends import protocol
from toolproof.backends.failures import ENGINE_FAILURES, qualified_name, rule_for

ENGINES: tuple[ModuleType, ...] = (
    celery.exceptions,
    billiard.exceptions,
    kombu.exceptions,
    amqp.exceptions,
    redis.exceptions,
    temporalio.exceptions,
    temporalio.service,
    protocol,
)
OWN_PREFIXES = ("celery.", "billiard.", "kombu.", "amqp.", "redis.", "temporalio.", "toolproof.")


def engine_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in ENGINES:
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith(OWN_PREFIXES)
            ):
                found[qualified_name(value)] = value
    return [found[name] for name in sorted(found)]


EXCEPTIONS = engine_exceptions()


def test_there_are_engine_exceptions_to_map() -> None:
    assert len(EXCEPTIONS) > 80


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=qualified_name)
def test_every_engine_exception_is_mapped(cls: type[BaseException]) -> None:
    error = cls.__new__(cls)
    assert rule_for(error) is not None, f"{qualified_name(cls)} has no rule in ENGINE_FAILURES"


def _os_errors(cls: type[BaseException]) -> list[type[BaseException]]:
    return [cls, *(found for sub in cls.__subclasses__() for found in _os_errors(sub))]


PIPE_ERRORS = sorted(
    {qualified_name(cls): cls for cls in _os_errors(OSError) if cls.__module__ == "builtins"}
)


def test_the_pipe_errors_include_the_ones_a_worker_pipe_raises() -> None:
    assert {"builtins.BrokenPipeError", "builtins.ConnectionResetError"} <= set(PIPE_ERRORS)


@pytest.mark.parametrize("name", PIPE_ERRORS)
def test_every_pipe_and_socket_error_is_mapped(name: str) -> None:
    cls = {qualified_name(c): c for c in _os_errors(OSError)}[name]
    assert rule_for(cls.__new__(cls)) is not None, f"{name} has no rule in ENGINE_FAILURES"


def test_every_table_key_names_a_real_class() -> None:
    known = {qualified_name(cls) for cls in EXCEPTIONS} | {
        "builtins.BrokenPipeError",
        "builtins.ConnectionError",
        "builtins.TimeoutError",
        "builtins.OSError",
    }
    assert sorted(set(ENGINE_FAILURES) - known) == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (BrokenPipeError(), ("worker", "worker", True)),
        (ConnectionRefusedError(), ("unavailable", "backend", True)),
        (protocol.ProtocolError("x"), ("backend", "worker", True)),
        (billiard.exceptions.WorkerLostError(), ("worker", "worker", True)),
        (billiard.exceptions.TimeLimitExceeded(), ("timeout", "worker", True)),
        (celery.exceptions.TaskRevokedError(), ("cancelled", "backend", True)),
        (celery.exceptions.TimeoutError(), ("timeout", "backend", True)),
        (kombu.exceptions.OperationalError(), ("unavailable", "backend", True)),
        (redis.exceptions.ConnectionError(), ("unavailable", "backend", True)),
        (redis.exceptions.AuthenticationError(), ("unavailable", "backend", True)),
        (redis.exceptions.ResponseError(), ("backend", "backend", False)),
        (celery.exceptions.NotRegistered(), ("backend", "worker", False)),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else "",
)
def test_the_failures_a_call_meets(error: BaseException, expected: tuple[str, str, bool]) -> None:
    rule = rule_for(error)
    assert rule is not None
    assert (rule.kind, rule.where, rule.retryable) == expected


def test_a_programming_error_is_not_an_engine_failure() -> None:
    assert rule_for(ValueError("bug")) is None
    assert rule_for(KeyError("bug")) is None
