"""The name rules, each spelled once: tool and variant names, and parameter names.

:data:`TOOL_NAME_PATTERN` is MCP's and most model APIs' tool-name rule; the Toolset,
the apply site (variant names) and the config (``[[mcp]] name``, ``[[retrieval]]
name``) all use it. :data:`PARAMETER_NAME_PATTERN` is the rule for a parameter name
the ``args`` transformer presents (a property key of an input schema); it is its own
rule, today with the same characters and length as a tool name.
"""

from __future__ import annotations

import re

__all__ = [
    "PARAMETER_NAME_PATTERN",
    "PARAMETER_NAME_RE",
    "TOOL_NAME_PATTERN",
    "TOOL_NAME_RE",
    "TOOL_NAME_RULE",
]

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
"""What a tool or variant name must match, as written in messages and JSON Schema."""

TOOL_NAME_RE = re.compile(TOOL_NAME_PATTERN.removesuffix("$") + r"\Z")
""":data:`TOOL_NAME_PATTERN` compiled with ``\\Z`` (Python's ``$`` also matches before a
trailing newline)."""

TOOL_NAME_RULE = f"must match {TOOL_NAME_PATTERN} (letters, digits, '_', '.', '-')"
"""The rule in words, for errors."""

PARAMETER_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
"""What a parameter name the ``args`` transformer presents must match."""

PARAMETER_NAME_RE = re.compile(PARAMETER_NAME_PATTERN.removesuffix("$") + r"\Z")
""":data:`PARAMETER_NAME_PATTERN` compiled with ``\\Z``."""
