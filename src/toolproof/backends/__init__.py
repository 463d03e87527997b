"""Execution backends (DESIGN.md section 6): relocate a tool body to a worker process.

Every backend is a :class:`Backend` (``async submit(BackendRequest) -> ToolResult``,
``aclose()``): :class:`ProcessPool` (``process``), the Celery client (``celery``),
the Temporal client (``temporal``)
and the in-process :class:`LocalBackend` (for tests, as httpx ships
``MockTransport``). :func:`backend` is the form that turns a backend maker into an
extension; :data:`PROCESS` and :data:`CELERY` are built with it. Importing this
package registers nothing: the composition root (:func:`toolproof.config.extension_registry`,
used by ``load_toolset``) registers them into the registry it binds from, with
:func:`register_backends`. Celery (or ``temporalio``) is imported only when a ``celery``
(or ``temporal``) variant is built.
"""

from toolproof.backends.builtin import CELERY, PROCESS, SANDBOX, TEMPORAL
from toolproof.backends.decorators import backend
from toolproof.backends.local import LocalBackend
from toolproof.backends.process import ProcessPool
from toolproof.backends.protocol import Backend, BackendRequest
from toolproof.extensions.registry import ExtensionRegistry

__all__ = [
    "CELERY",
    "PROCESS",
    "SANDBOX",
    "TEMPORAL",
    "Backend",
    "BackendRequest",
    "LocalBackend",
    "ProcessPool",
    "backend",
    "register_backends",
]


def register_backends(registry: ExtensionRegistry) -> None:
    """Register ``process``, ``sandbox``, ``celery`` and ``temporal`` in ``registry``.

    ``registry`` is the composition root's.

    Raises:
        ExtensionError: either name is already taken in ``registry``.

    """
    for ext in (PROCESS, SANDBOX, CELERY, TEMPORAL):
        registry.register(ext)
