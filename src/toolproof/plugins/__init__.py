"""Plugins: parts of a run found through entry points (reasoners, checks, runtimes)."""

from toolproof.plugins.loading import ENTRY_POINT_GROUPS, load_plugin, plugin_error

__all__ = ["ENTRY_POINT_GROUPS", "load_plugin", "plugin_error"]
