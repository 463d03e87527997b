"""A recorded run served as a cassette to an application's own tests.

``Cassette(run_dir)`` reads a run directory (its manifest verified first: a
tampered run is refused) and indexes every recorded tool call by tool name and the
canonical JSON (RFC 8785) of its arguments. :meth:`Cassette.toolset` builds a
Toolset whose tools answer from the record; the application under test uses it
like the real one. A call that was not recorded **fails closed**: the tool returns
a ``cassette_miss`` failure whose message shows the nearest recorded call as a
unified diff, and the miss is kept in :attr:`Cassette.misses` (the pytest fixture
fails the test with it). :meth:`Cassette.override` supplies a result for one call
in one test.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from toolproof.bundle.manifest import check_manifest
from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.contract.trace import ToolCalled, ToolReturned
from toolproof.errors import InputError
from toolproof.identity import canonical_json
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset
from toolproof.verify.view import RunView

__all__ = ["Cassette"]


def _key(tool: str, arguments: Any) -> tuple[str, bytes]:
    return tool, canonical_json(arguments)


def _pretty(tool: str, arguments: Any) -> list[str]:
    text = json.dumps({"tool": tool, "arguments": arguments}, indent=2, sort_keys=True)
    return text.splitlines()


class Cassette:
    """Recorded tool results of one run, served by tool name and canonical arguments.

    Args:
        run_dir: a run directory (``<root>/runs/run_<hex>``).

    Raises:
        InputError: the run's manifest does not verify, or its trace does not parse.

    """

    def __init__(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        manifest, digests, findings = check_manifest(run_dir)
        if findings or manifest is None:
            reason = findings[0].message if findings else "no manifest"
            raise InputError(f"cassette {run_dir}: the run does not verify: {reason}")
        view = RunView(run_dir, digests, {entry.path: entry.size for entry in manifest.files})
        if view.events is None or view.runtime is None:
            raise InputError(f"cassette {run_dir}: the trace or runtime does not parse")
        self.run_dir = run_dir
        self.runtime = view.runtime
        self.recorded: dict[tuple[str, bytes], ToolResult] = {}
        self.calls: list[tuple[str, Any]] = []
        pending: dict[str, ToolCalled] = {}
        for event in view.events:
            if isinstance(event, ToolCalled):
                pending[event.call_id] = event
            elif isinstance(event, ToolReturned) and event.call_id in pending:
                call = pending.pop(event.call_id).call
                self.recorded[_key(call.tool, dict(call.arguments))] = event.result
                self.calls.append((call.tool, dict(call.arguments)))
        self.overrides: dict[tuple[str, bytes], ToolResult] = {}
        self.misses: list[str] = []
        self.served = 0

    def override(self, tool: str, arguments: dict[str, Any], result: Any) -> None:
        """Answer ``tool(arguments)`` with ``result`` (a :class:`ToolResult` or a JSON value)."""
        value = result if isinstance(result, ToolResult) else ToolResult.success(result)
        self.overrides[_key(tool, arguments)] = value

    def nearest(self, tool: str, arguments: dict[str, Any]) -> str:
        """The nearest recorded call to ``tool(arguments)``: a unified diff, recorded -> asked."""
        if not self.calls:
            return "(the run recorded no tool calls)"
        asked = _pretty(tool, arguments)
        same_tool = [call for call in self.calls if call[0] == tool] or self.calls

        def score(call: tuple[str, Any]) -> float:
            return difflib.SequenceMatcher(None, _pretty(*call), asked).ratio()

        best = max(same_tool, key=score)
        diff = difflib.unified_diff(_pretty(*best), asked, "recorded", "asked", lineterm="")
        return "\n".join(diff)

    def lookup(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """The override or recorded result of ``tool(arguments)``; a miss fails closed.

        Returns:
            The result; on a miss, a ``cassette_miss`` failure with the nearest call's diff
            (also appended to :attr:`misses`).

        """
        key = _key(tool, arguments)
        found = self.overrides.get(key) or self.recorded.get(key)
        if found is not None:
            self.served += 1
            return found
        message = (
            f"cassette {self.run_dir.name}: no recorded call {tool}"
            f"({canonical_json(arguments).decode()}); nearest recorded call:\n"
            + self.nearest(tool, arguments)
        )
        self.misses.append(message)
        return ToolResult.fail("cassette_miss", message, where="runtime")

    def tool(self, spec: ToolSpec) -> Tool:
        """A tool with ``spec`` whose calls are answered by :meth:`lookup`."""

        async def body(arguments: dict[str, Any]) -> ToolResult:
            return self.lookup(spec.name, arguments)

        return Tool(spec, body, source=f"cassette:{self.run_dir.name}")

    def toolset(self, base: Toolset | None = None) -> Toolset:
        """A sealed Toolset answering from the record.

        Args:
            base: the application's real Toolset; its tools' specs (schemas) are kept and
                their bodies never run. Without it, one permissive tool per recorded name.

        """
        toolset = Toolset()
        if base is not None:
            for name in base.names():
                toolset.add(self.tool(base[name].spec))
        else:
            for name in sorted({tool.name for tool in self.runtime.toolset.tools}):
                spec = ToolSpec(
                    name=name,
                    description=f"{name}, served from a recorded run",
                    input_schema={"type": "object"},
                )
                toolset.add(self.tool(spec))
        return toolset.seal()
