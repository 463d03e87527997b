"""toolproof: agent tools that can be trusted.

Tools from Python functions and declared JSON Schemas, validated on every call;
extensions that mint named variants; evidence-chained runs that verify and replay.
The names below are the public API (DESIGN.md section 10); everything else is
private to its folder. Optional adapters (LangChain, FastAPI, Celery) are never
imported here.
"""

from toolproof.adapters.agent_session import Session
from toolproof.adapters.session_runs import record_session, replay_session
from toolproof.adapters.telemetry import instrument
from toolproof.config import load_toolset
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
    ToolAnnotations,
    ToolCall,
    ToolDescriptor,
    ToolFailure,
    ToolResult,
    ToolsetDescriptor,
    ToolSpec,
)
from toolproof.errors import (
    CanonicalizationError,
    ConfigError,
    ExtensionError,
    IdentityMismatchError,
    ReplayRefused,
    ToolBindError,
    ToolCallError,
    ToolNameError,
    ToolproofError,
    ToolsetSealedError,
    UsageError,
    VerificationError,
)
from toolproof.evidence.reasoners import ReasonerBackend, ReasonerRequest, register_reasoner
from toolproof.extensions import ExtensionKind, extension, transformer, wrapper
from toolproof.extensions.approvals import (
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalStore,
    Approver,
    Decision,
)
from toolproof.identity import canonical_json, content_id, digest
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.runs.runtime_plugin import RuntimePlugin
from toolproof.runs.spec import load_spec
from toolproof.tools.content import Audio, EmbeddedResource, Image, ResourceLink
from toolproof.tools.context import Context
from toolproof.tools.declared import ToolContribution, bind_contribution, declarable_field
from toolproof.tools.function import tool
from toolproof.tools.limits import SchemaLimits
from toolproof.tools.python_catalog import prompt, resource
from toolproof.tools.retrieval_seam import RetrievalBackend
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset
from toolproof.verify.base import Check
from toolproof.verify.sequence import register_check
from toolproof.verify.verifier import verify_run

__version__ = "0.1.0"

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "Approver",
    "Audio",
    "CanonicalizationError",
    "Check",
    "CheckSpec",
    "Claim",
    "ConfigError",
    "Context",
    "Decision",
    "EmbeddedResource",
    "EvidenceRecord",
    "ExecutionRuntime",
    "ExtensionError",
    "ExtensionKind",
    "Finding",
    "IdentityMismatchError",
    "Image",
    "PluginDescriptor",
    "ReasonerBackend",
    "ReasonerRequest",
    "ReplayRefused",
    "Report",
    "ResourceLink",
    "RetrievalBackend",
    "RunSpec",
    "RuntimePlugin",
    "SchemaLimits",
    "Session",
    "Severity",
    "SupportRef",
    "Tool",
    "ToolAnnotations",
    "ToolBindError",
    "ToolCall",
    "ToolCallError",
    "ToolContribution",
    "ToolDescriptor",
    "ToolFailure",
    "ToolNameError",
    "ToolResult",
    "ToolSpec",
    "ToolproofError",
    "Toolset",
    "ToolsetDescriptor",
    "ToolsetSealedError",
    "UsageError",
    "VerificationError",
    "__version__",
    "bind_contribution",
    "canonical_json",
    "content_id",
    "declarable_field",
    "digest",
    "execute_run",
    "extension",
    "instrument",
    "load_spec",
    "load_toolset",
    "prompt",
    "record_session",
    "register_check",
    "register_reasoner",
    "replay_run",
    "replay_session",
    "resource",
    "tool",
    "transformer",
    "verify_run",
    "wrapper",
]
