"""``sample-app``: an application-controlled runtime that tags every call with a tenant."""

from __future__ import annotations

from typing import Any

from toolproof.runs.calls import CallPort, LiveCalls
from toolproof.runs.runtime_plugin import RuntimePlugin
from toolproof.tools.toolset import Toolset


class AppRuntime(RuntimePlugin):
    """Calls tools in-process, like the local runtime; ``tenant`` is its configuration."""

    kind = "app"
    name = "sample-app"
    version = "1"
    tenant = "shop-1"

    def configuration(self) -> dict[str, Any]:
        """The tenant the calls are made for."""
        return {"tenant": self.tenant}

    def calls(self, toolset: Toolset) -> CallPort:
        """Local calls."""
        return LiveCalls(toolset)
