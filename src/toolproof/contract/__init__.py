"""Frozen, canonical pydantic models: the contracts every layer exchanges.

The wire and record models users and plugins read (descriptors, evidence, reports,
failures) are exported here; ``toolproof`` itself keeps the user API.
"""

from toolproof.contract.base import SCHEMA_VERSION, CanonicalModel, ContentModel
from toolproof.contract.evidence import Claim, EvidenceRecord, SupportRef
from toolproof.contract.runs import (
    CheckSpec,
    ExecutionRuntime,
    Finding,
    PluginDescriptor,
    Report,
    RunSpec,
    Severity,
)
from toolproof.contract.tools import (
    FailureKind,
    FailureWhere,
    PresentedTool,
    PresentedTools,
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
    "CheckSpec",
    "Claim",
    "ContentModel",
    "EvidenceRecord",
    "ExecutionRuntime",
    "FailureKind",
    "FailureWhere",
    "Finding",
    "PluginDescriptor",
    "PresentedTool",
    "PresentedTools",
    "Report",
    "RunSpec",
    "Severity",
    "StackLayer",
    "SupportRef",
    "ToolAnnotations",
    "ToolCall",
    "ToolDescriptor",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "ToolsetDescriptor",
]
