"""Celery settings, error translation and the ``toolproof worker`` command (no broker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_support import copy_fixture
from billiard.exceptions import WorkerLostError
from celery.exceptions import TaskRevokedError, TimeLimitExceeded
from cli_support import toolproof

from toolproof.backends.celery import (
    DEFAULT_BROKER,
    ENV_BROKER,
    ENV_RESULT_BACKEND,
    CelerySettings,
    describe,
    make_app,
    settings_from,
)
from toolproof.backends.celery_backend import failure_for


def test_broker_comes_from_config_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_BROKER, raising=False)
    monkeypatch.delenv(ENV_RESULT_BACKEND, raising=False)
    assert CelerySettings().broker_url() == DEFAULT_BROKER == "redis://127.0.0.1:6379/0"
    assert CelerySettings().result_url() == DEFAULT_BROKER
    monkeypatch.setenv(ENV_BROKER, "redis://cache:6379/3")
    assert CelerySettings().broker_url() == "redis://cache:6379/3"
    assert CelerySettings().result_url() == "redis://cache:6379/3"
    configured = settings_from({"celery": {"broker": "amqp://guest@rabbit//"}})
    assert configured.broker_url() == "amqp://guest@rabbit//"
    assert configured.result_url() == DEFAULT_BROKER  # AMQP stores no results: Redis does
    monkeypatch.setenv(ENV_RESULT_BACKEND, "redis://results:6379/1")
    assert configured.result_url() == "redis://results:6379/1"


def test_settings_refuse_unknown_keys() -> None:
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        settings_from({"celery": {"brokr": "redis://x"}})


def test_passwords_never_appear_in_messages() -> None:
    assert describe("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert describe("amqp://user:pw@rabbit//") == "amqp://user:***@rabbit//"
    assert describe("redis://host:6379/0") == "redis://host:6379/0"


def test_app_is_json_only_with_late_acks() -> None:
    conf = make_app(CelerySettings(broker="redis://127.0.0.1:6379/15")).conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is False
    assert conf.broker_connection_retry is False and conf.task_publish_retry is False
    assert conf.broker_transport_options["visibility_timeout"] == 3600
    worker = make_app(CelerySettings(), worker=True).conf
    assert worker.broker_connection_retry is True


@pytest.mark.parametrize(
    ("state", "error", "kind", "where", "start"),
    [
        (
            "FAILURE",
            WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)"),
            "worker",
            "worker",
            "celery task t1: the worker process running it was lost (WorkerLostError: ",
        ),
        (
            "FAILURE",
            TimeLimitExceeded(4),
            "timeout",
            "worker",
            "celery task t1: the worker stopped it at its time limit (TimeLimitExceeded: ",
        ),
        (
            "REVOKED",
            TaskRevokedError("expired"),
            "cancelled",
            "backend",
            "celery task t1 was revoked or expired before it finished (TaskRevokedError: ",
        ),
        (
            "FAILURE",
            KeyError("x"),
            "backend",
            "worker",
            "celery task t1 failed on the worker outside the tool body (KeyError: ",
        ),
        ("REVOKED", None, "cancelled", "backend", "celery task t1 was revoked or expired"),
    ],
)
def test_every_engine_failure_is_mapped(
    state: str, error: BaseException | None, kind: str, where: str, start: str
) -> None:
    failure = failure_for("t1", state, error).failure
    assert failure is not None
    assert (failure.kind, failure.where) == (kind, where)
    assert failure.message.startswith(start)
    assert failure.detail["task_id"] == "t1"


def test_worker_command_refuses_a_bad_celery_table(tmp_path: Path) -> None:
    config = copy_fixture(
        tmp_path, '[[python]]\nmodule = "backend_tools"\n\n[backends.celery]\nqueue = "a b"\n'
    )
    done = toolproof("worker", "--config", str(config))
    assert done.returncode == 1
    assert f"{config}: backends.celery.queue: String should match pattern" in done.stderr


def test_worker_command_refuses_a_missing_config(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    done = toolproof("worker", "--config", str(missing))
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: {missing}: (file): file not found"
