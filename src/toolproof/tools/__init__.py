"""Tools: the Tool binding, schemas, tools from functions, the Toolset (seed 003)."""

from toolproof.tools.function import ToolOptions, tool
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Quarantined, Toolset

__all__ = ["Quarantined", "Tool", "ToolOptions", "Toolset", "tool"]
