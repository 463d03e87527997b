"""Execution backends (DESIGN.md section 6): relocate a tool body to a worker process.

:data:`PROCESS` and :data:`CELERY` are the BACKEND extensions; importing this package
registers nothing. The composition root (:func:`toolproof.config.extension_registry`,
used by ``load_toolset``) registers them into the registry it binds from, with
:func:`register_backends`. Celery itself is imported only when a ``celery`` variant
is built.
"""

from toolproof.backends.extensions import (
    BACKEND_VERSION,
    CeleryConfig,
    ProcessConfig,
    celery_factory,
    process_factory,
)
from toolproof.backends.process import ProcessPool
from toolproof.extensions.forms import register_extension
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.registry import Extension, ExtensionRegistry, default_registry

__all__ = ["CELERY", "PROCESS", "ProcessPool", "register_backends"]

PROCESS: Extension = register_extension(
    process_factory,
    kind=ExtensionKind.BACKEND,
    name="process",
    config=ProcessConfig,
    version=BACKEND_VERSION,
    description="Run the tool in a warm pool of local worker processes (kill on timeout).",
    wants_context=True,
    register=False,
)
"""The ``process`` backend extension."""

CELERY: Extension = register_extension(
    celery_factory,
    kind=ExtensionKind.BACKEND,
    name="celery",
    config=CeleryConfig,
    version=BACKEND_VERSION,
    description="Run the tool on a Celery worker (toolproof worker --config FILE).",
    wants_context=True,
    register=False,
)
"""The ``celery`` backend extension (needs ``toolproof[celery]`` when applied)."""


def register_backends(registry: ExtensionRegistry | None = None) -> None:
    """Register ``process`` and ``celery`` in ``registry`` (default: the process-wide one)."""
    target = registry or default_registry()
    for ext in (PROCESS, CELERY):
        target.register(ext)
