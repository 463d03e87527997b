"""Frozen, canonical pydantic models: the contracts every layer exchanges."""

from toolproof.contract.base import SCHEMA_VERSION, CanonicalModel, ContentModel
from toolproof.contract.tools import (
    StackLayer,
    ToolAnnotations,
    ToolCall,
    ToolDescriptor,
    ToolFailure,
    ToolResult,
    ToolsetDescriptor,
    ToolSpec,
)

__all__ = [
    "SCHEMA_VERSION",
    "CanonicalModel",
    "ContentModel",
    "StackLayer",
    "ToolAnnotations",
    "ToolCall",
    "ToolDescriptor",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "ToolsetDescriptor",
]
