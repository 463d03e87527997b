"""The execution-runtime seam: how a live run's tool calls are made.

A :class:`RuntimePlugin` (a class or instance in the ``toolproof.runtimes``
entry-point group or a :class:`RuntimeRegistry`, or passed to
:func:`~toolproof.runs.run.execute_run`) gives the
executor its :class:`~toolproof.runs.calls.CallPort` for one live run: local,
remote, or application-controlled. Its ``kind`` becomes ``ExecutionRuntime.kind`` and
its :meth:`RuntimePlugin.descriptor` (name, version, configuration digest) is listed
in ``ExecutionRuntime.providers``, so a changed runtime or configuration changes the
run id. Obligations: every call goes through the port (no call outside the trace);
every failure is a normalized :class:`~toolproof.contract.tools.ToolResult` failure,
and the port returns each result with what the call's layers reported (an
:class:`~toolproof.tools.observe.Observed`; subclass :class:`~toolproof.runs.calls.LiveCalls`
to get both). Frozen replay never uses a
runtime plugin: recorded results are served by call id.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from toolproof.contract.runs import PluginDescriptor
from toolproof.identity import digest_json
from toolproof.plugins.loading import plugin_error
from toolproof.plugins.registry import Registry
from toolproof.runs.calls import CallPort
from toolproof.tools.toolset import Toolset

__all__ = ["RuntimePlugin", "RuntimeRegistry"]


class RuntimePlugin(ABC):
    """An execution runtime. Set ``kind`` and ``name``; implement :meth:`calls`."""

    kind: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[str] = "1"

    def configuration(self) -> dict[str, Any]:
        """Every setting that changes how calls are made (JSON); part of the fingerprint."""
        return {}

    def descriptor(self, origin: str = "toolproof") -> PluginDescriptor:
        """Kind ``runtime``, the name, version and the digest of :meth:`configuration`."""
        config = {"kind": self.kind, "configuration": self.configuration()}
        return PluginDescriptor(
            kind="runtime",
            name=self.name,
            version=self.version,
            config_digest=digest_json(config),
            origin=origin,
        )

    @abstractmethod
    def calls(self, toolset: Toolset) -> CallPort:
        """The call port of one live run over ``toolset`` (``mode`` must be ``live``)."""


class RuntimeRegistry(Registry[RuntimePlugin | type[RuntimePlugin]]):
    """Execution runtimes by name: registered in code, then ``toolproof.runtimes`` entry points.

    A new registry is empty (the local runtime is the default, not a name); the
    composition root builds the one a run uses and passes it down.
    """

    def __init__(self) -> None:
        super().__init__("runtime")

    def create(self, name: str) -> tuple[RuntimePlugin, str]:
        """Build the runtime plugin ``name`` (a registered or entry-point class is instantiated).

        Returns:
            The plugin and its origin (``registered`` or ``distribution:module:attr``).

        Raises:
            InputError: no such plugin, or it is broken (it names the plugin and the rule).

        """
        item, origin = self.require(
            name,
            f"unknown runtime {name!r}: no registered runtime and no 'toolproof.runtimes' "
            "entry point has that name",
        )
        try:
            plugin = item() if isinstance(item, type) else item
        except Exception as exc:  # foreign constructor, reported naming the plugin
            rule = f"building it raised {type(exc).__name__}: {exc}"
            raise plugin_error("runtime", name, origin, rule) from exc
        if not isinstance(plugin, RuntimePlugin):
            rule = f"the entry point is {item!r}, not a RuntimePlugin"
            raise plugin_error("runtime", name, origin, rule)
        return plugin, origin
