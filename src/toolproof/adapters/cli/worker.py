"""``toolproof worker``: a Celery or Temporal worker serving one ``toolproof.toml``.

It checks that the composition root builds, then runs ``celery worker`` with the
``toolproof.run`` task registered (see :mod:`toolproof.backends.celery`), or, with
``--engine temporal``, a Temporal worker serving the ``toolproof.run`` activity (see
:mod:`toolproof.backends.temporal`). Run it on any machine that has the same
``toolproof.toml`` and tool code and reaches the broker or the Temporal frontend.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import typer

from toolproof.adapters.cli.app import ToolproofCommand, docs_epilog, err_console, run_async
from toolproof.adapters.cli.options import ConfigOption
from toolproof.errors import ConfigError, InputError, validation_problem
from toolproof.version import install_hint

__all__ = ["register", "worker"]


def register(app: typer.Typer) -> None:
    """Add the ``worker`` command to ``app``."""
    app.command("worker", cls=ToolproofCommand, epilog=docs_epilog("backends.md"))(worker)


async def _check(config: Path) -> tuple[int, str]:
    from toolproof.config import build_toolset

    toolset = await build_toolset(config)
    try:
        return len(toolset), toolset.descriptor().digest
    finally:
        await toolset.aclose()


def _settings(config: Path, engine: str = "celery") -> Any:
    from pydantic import ValidationError

    from toolproof.config import load_config

    if engine == "temporal":
        from toolproof.backends.temporal import settings_from
    else:
        from toolproof.backends.celery import settings_from  # type: ignore[assignment]

    parsed, _ = load_config(config)
    try:
        return settings_from(parsed.backends)
    except ValidationError as exc:
        first = validation_problem(exc)
        key = ".".join(["backends", engine, *(str(part) for part in first.loc)])
        rule = first.rule
        if first.kind == "extra_forbidden":
            rule = f"unknown key (not part of the [backends.{engine}] table)"
        raise ConfigError(str(config), key, rule) from None


def _temporal_worker(config: Path, queue: list[str], concurrency: int) -> None:
    from toolproof.adapters.telemetry.instrument import instrumented_builder
    from toolproof.config import build_toolset

    try:
        from toolproof.backends.temporal_worker import serve
    except ImportError as exc:
        raise InputError(
            f"the temporal backend needs its extra: {install_hint('temporal')} ({exc})"
        ) from None
    if len(queue) > 1:
        raise InputError("--engine temporal serves one task queue: give --queue at most once")
    settings = _settings(config, "temporal")
    count, digest = run_async(_check(config))
    task_queue = queue[0] if queue else settings.task_queue

    def ready() -> None:
        err_console.print(
            f"toolproof worker: {count} tools from {config} (descriptor {digest}), "
            f"temporal {settings.target()} namespace {settings.namespace}, "
            f"task queue {task_queue}, concurrency {concurrency}",
            markup=False,
        )

    build = instrumented_builder(build_toolset)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve(
                config,
                settings,
                build,
                task_queue=task_queue,
                concurrency=concurrency,
                ready=ready,
            )
        )


def worker(
    config: Path = ConfigOption,
    queue: list[str] = typer.Option(
        [],
        "--queue",
        "-Q",
        help="A queue to serve (repeatable for celery; default: the queue of backends.ENGINE).",
    ),
    concurrency: int = typer.Option(
        2, "--concurrency", min=1, help="Worker processes (each builds the Toolset once)."
    ),
    loglevel: str = typer.Option("INFO", "--loglevel", help="Celery log level."),
    engine: str = typer.Option(
        "celery", "--engine", help="The engine to serve: celery or temporal."
    ),
) -> None:
    """Run a Celery (or Temporal) worker that serves the tools and variants of CONFIG."""
    from toolproof.adapters.telemetry.instrument import instrumented_builder
    from toolproof.config import build_toolset

    if engine not in ("celery", "temporal"):
        raise InputError(f"--engine {engine!r}: not an engine (rule: celery or temporal)")
    if engine == "temporal":
        _temporal_worker(config, queue, concurrency)
        return
    try:
        from toolproof.backends.celery_worker import worker_app
    except ImportError as exc:
        raise InputError(
            f"the celery backend needs its extra: {install_hint('celery')} ({exc})"
        ) from None
    settings = _settings(config)
    count, digest = run_async(_check(config))
    queues = list(queue) or [settings.queue]
    err_console.print(
        f"toolproof worker: {count} tools from {config} (descriptor {digest}), "
        f"queues {', '.join(queues)}, concurrency {concurrency}",
        markup=False,
    )
    app = worker_app(config, settings, instrumented_builder(build_toolset))
    app.worker_main(
        [
            "worker",
            f"--concurrency={concurrency}",
            f"--queues={','.join(queues)}",
            f"--loglevel={loglevel}",
            f"--hostname=toolproof-{os.getpid()}@%h",
            "--pool=prefork",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )
