"""Plugins: the interfaces a plugin implements, and the entry-point loader that finds them.

Registries by seam (:class:`Registry`) and the one loader of their entry points
(:func:`load_entry_point`) live here too. Plugin authors import the interfaces::

    from toolproof.plugins import Reasoner, ReasonerRequest, register_reasoner

* reasoners: :class:`Reasoner`, :class:`ReasonerRequest`, :func:`register_reasoner`;
* checks: :class:`Check`, :class:`CheckSpec`, :class:`Finding`, :class:`Severity`,
  :class:`PluginDescriptor`, :func:`register_check`;
* runtimes and retrieval: :class:`RuntimePlugin`, :class:`Retriever`.

Each interface lives with the layer that runs it (``evidence``, ``verify``, ``runs``,
``tools``), floors above the loader (:mod:`toolproof.plugins.loading`, which those
layers import); so this namespace loads an interface on first access (a module
``__getattr__``), never when a layer imports the loader. The former names
``ReasonerBackend`` and ``RetrievalBackend`` are still served, with a
:class:`DeprecationWarning` naming :class:`Reasoner` and :class:`Retriever`.
"""

from __future__ import annotations

import warnings
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
    from toolproof.evidence.reasoners import Reasoner, ReasonerRequest, register_reasoner
    from toolproof.runs.runtime_plugin import RuntimePlugin
    from toolproof.sources.retrieval.seam import Retriever
    from toolproof.verify.base import Check
    from toolproof.verify.sequence import register_check

__all__ = [
    "ENTRY_POINT_GROUPS",
    "REGISTERED",
    "Check",
    "CheckSpec",
    "Finding",
    "PluginDescriptor",
    "Reasoner",
    "ReasonerRequest",
    "Registry",
    "Retriever",
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
    "Reasoner": "toolproof.evidence.reasoners",
    "ReasonerRequest": "toolproof.evidence.reasoners",
    "register_reasoner": "toolproof.evidence.reasoners",
    "RuntimePlugin": "toolproof.runs.runtime_plugin",
    "Retriever": "toolproof.sources.retrieval.seam",
}
"""Interface name -> the module that defines it."""

_RENAMED = {"ReasonerBackend": "Reasoner", "RetrievalBackend": "Retriever"}
"""Deprecated interface name -> its name now ("backend" names only the relocation seam)."""


def __getattr__(name: str) -> Any:
    """Load a plugin interface on first access (see the module docstring)."""
    new = _RENAMED.get(name)
    if new is not None:
        warnings.warn(
            f"toolproof.plugins.{name} is deprecated: it is now {new} "
            f"(`from toolproof.plugins import {new}`)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(_HOMES[new]), new)
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), loaded or not."""
    return sorted(__all__)
