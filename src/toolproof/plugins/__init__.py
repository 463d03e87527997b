"""Plugins: registries by seam, and the one loader of their entry points.

The seams are reasoners, checks, retrieval, runtimes and extensions.
"""

from toolproof.plugins.loading import (
    ENTRY_POINT_GROUPS,
    entry_point_names,
    load_entry_point,
    plugin_error,
)
from toolproof.plugins.registry import REGISTERED, Registry

__all__ = [
    "ENTRY_POINT_GROUPS",
    "REGISTERED",
    "Registry",
    "entry_point_names",
    "load_entry_point",
    "plugin_error",
]
