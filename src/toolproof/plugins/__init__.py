"""Plugins: the interfaces a plugin implements, and the entry-point loader that finds them.

Registries by seam (:class:`Registry`) and the one loader of their entry points
(:func:`load_entry_point`) live here too. Plugin authors import the interfaces::

    from toolproof.plugins import ReasonerBackend, ReasonerRequest, register_reasoner

* reasoners: :class:`ReasonerBackend`, :class:`ReasonerRequest`, :func:`register_reasoner`;
* checks: :class:`Check`, :class:`CheckSpec`, :class:`Finding`, :class:`Severity`,
  :class:`PluginDescriptor`, :func:`register_check`;
* runtimes and retrieval: :class:`RuntimePlugin`, :class:`RetrievalBackend`.

Each interface lives with the layer that runs it (``evidence``, ``verify``, ``runs``,
``tools``), floors above the loader (:mod:`toolproof.plugins.loading`, which those
layers import); so this namespace loads an interface on first access (a module
``__getattr__``), never when a layer imports the loader.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from toolproof.plugins.loading import (
    ENTRY_POINT_GROUPS,
    entry_point_names,
    load_entry_point,
    plugin_error,
)
from toolproof.plugins.registry import REGISTERED, Registry

if TYPE_CHECKING:
    from toolproof.contract.runs import CheckSpec, Finding, PluginDescriptor, Severity
    from toolproof.evidence.reasoners import ReasonerBackend, ReasonerRequest, register_reasoner
    from toolproof.runs.runtime_plugin import RuntimePlugin
    from toolproof.sources.retrieval.seam import RetrievalBackend
    from toolproof.verify.base import Check
    from toolproof.verify.sequence import register_check

__all__ = [
    "ENTRY_POINT_GROUPS",
    "REGISTERED",
    "Check",
    "CheckSpec",
    "Finding",
    "PluginDescriptor",
    "ReasonerBackend",
    "ReasonerRequest",
    "Registry",
    "RetrievalBackend",
    "RuntimePlugin",
    "Severity",
    "entry_point_names",
    "load_entry_point",
    "plugin_error",
    "register_check",
    "register_reasoner",
]

_HOMES = {
    "Check": "toolproof.verify.base",
    "CheckSpec": "toolproof.contract.runs",
    "Finding": "toolproof.contract.runs",
    "PluginDescriptor": "toolproof.contract.runs",
    "Severity": "toolproof.contract.runs",
    "register_check": "toolproof.verify.sequence",
    "ReasonerBackend": "toolproof.evidence.reasoners",
    "ReasonerRequest": "toolproof.evidence.reasoners",
    "register_reasoner": "toolproof.evidence.reasoners",
    "RuntimePlugin": "toolproof.runs.runtime_plugin",
    "RetrievalBackend": "toolproof.sources.retrieval.seam",
}
"""Interface name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    """Load a plugin interface on first access (see the module docstring)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), loaded or not."""
    return sorted(__all__)
