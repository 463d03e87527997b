"""The registries a run's plugin names resolve in, apart from the rest of the root.

:func:`run_registries` imports only :mod:`toolproof.runs.registries`, so a face that
needs a run's registries and no Toolset (``toolproof verify``, ``replay``) does not
import the backends, sources and extensions :mod:`toolproof.config.root` binds from.
"""

from __future__ import annotations

from toolproof.runs.registries import RunRegistries

__all__ = ["run_registries"]


def run_registries() -> RunRegistries:
    """The registries a run's plugin names resolve in, as the faces (CLI, HTTP API) use them.

    Built here, at the composition root, as :func:`extension_registry` is: the built-in
    reasoners, no check or runtime registered in code, and every seam's installed entry
    points (loaded on a name's first lookup and kept in that registry). An application
    serving the HTTP API registers its own plugins into the value it passes
    (``ApiSettings(registries=...)``).

    Returns:
        A new :class:`~toolproof.runs.registries.RunRegistries` on every call (no
        process-wide state).
    """
    return RunRegistries()
