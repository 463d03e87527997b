"""toolproof: agent tools that can be trusted.

Tools from Python functions and declared JSON Schemas, validated on every call;
extensions that mint named variants; evidence-chained runs that verify and replay.
The names below are the user API (DESIGN.md section 10) and every error toolproof
raises; plugin interfaces live in :mod:`toolproof.plugins`, contract models in
:mod:`toolproof.contract`, everything else is private to its folder.

``import toolproof`` imports no submodule: each name loads its module on first access
(a module ``__getattr__``), so a CLI call or a plain ``import toolproof`` does not pay
for the config loader, the backends or httpx until it uses them. Optional adapters
(LangChain, FastAPI, Celery) are never imported here.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

from toolproof.version import __version__

if TYPE_CHECKING:
    from toolproof.adapters.session import Session
    from toolproof.adapters.session_runs import record_session, replay_session
    from toolproof.adapters.telemetry.check import check_spans
    from toolproof.adapters.telemetry.instrument import instrument, uninstrument
    from toolproof.config import load_toolset
    from toolproof.contract.runs import Report, RunSpec
    from toolproof.contract.tools import (
        ToolAnnotations,
        ToolCall,
        ToolFailure,
        ToolResult,
        ToolSpec,
    )
    from toolproof.errors import (
        AuthenticationError,
        BackendError,
        CanonicalizationError,
        ConfigError,
        ExtensionError,
        IdentityMismatchError,
        InputError,
        ProtocolError,
        RecordingError,
        RefError,
        ReplayRefused,
        ToolBindError,
        ToolCallError,
        ToolNameError,
        ToolproofError,
        ToolsetSealedError,
        UsageError,
        VerificationError,
    )
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
    from toolproof.runs.spec import load_spec
    from toolproof.schema.limits import SchemaLimits
    from toolproof.tools.content import Audio, EmbeddedResource, Image, ResourceLink
    from toolproof.tools.context import Context
    from toolproof.tools.declared import ToolContribution, bind_contribution, declarable_field
    from toolproof.tools.function import tool
    from toolproof.tools.python_catalog import prompt, resource
    from toolproof.tools.tool import Tool
    from toolproof.tools.toolset import Toolset
    from toolproof.verify.verifier import verify_run

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "Approver",
    "Audio",
    "AuthenticationError",
    "BackendError",
    "CanonicalizationError",
    "ConfigError",
    "Context",
    "Decision",
    "EmbeddedResource",
    "ExtensionError",
    "ExtensionKind",
    "IdentityMismatchError",
    "Image",
    "InputError",
    "ProtocolError",
    "RecordingError",
    "RefError",
    "ReplayRefused",
    "Report",
    "ResourceLink",
    "RunSpec",
    "SchemaLimits",
    "Session",
    "Tool",
    "ToolAnnotations",
    "ToolBindError",
    "ToolCall",
    "ToolCallError",
    "ToolContribution",
    "ToolFailure",
    "ToolNameError",
    "ToolResult",
    "ToolSpec",
    "ToolproofError",
    "Toolset",
    "ToolsetSealedError",
    "UsageError",
    "VerificationError",
    "__version__",
    "bind_contribution",
    "canonical_json",
    "check_spans",
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
    "replay_run",
    "replay_session",
    "resource",
    "tool",
    "transformer",
    "uninstrument",
    "verify_run",
    "wrapper",
]

_HOMES: dict[str, str] = {
    "Session": "toolproof.adapters.session",
    "record_session": "toolproof.adapters.session_runs",
    "replay_session": "toolproof.adapters.session_runs",
    "instrument": "toolproof.adapters.telemetry.instrument",
    "uninstrument": "toolproof.adapters.telemetry.instrument",
    "check_spans": "toolproof.adapters.telemetry.check",
    "load_toolset": "toolproof.config",
    "Report": "toolproof.contract.runs",
    "RunSpec": "toolproof.contract.runs",
    "ToolAnnotations": "toolproof.contract.tools",
    "ToolCall": "toolproof.contract.tools",
    "ToolFailure": "toolproof.contract.tools",
    "ToolResult": "toolproof.contract.tools",
    "ToolSpec": "toolproof.contract.tools",
    "AuthenticationError": "toolproof.errors",
    "BackendError": "toolproof.errors",
    "CanonicalizationError": "toolproof.errors",
    "ConfigError": "toolproof.errors",
    "ExtensionError": "toolproof.errors",
    "IdentityMismatchError": "toolproof.errors",
    "InputError": "toolproof.errors",
    "ProtocolError": "toolproof.errors",
    "RecordingError": "toolproof.errors",
    "RefError": "toolproof.errors",
    "ReplayRefused": "toolproof.errors",
    "ToolBindError": "toolproof.errors",
    "ToolCallError": "toolproof.errors",
    "ToolNameError": "toolproof.errors",
    "ToolproofError": "toolproof.errors",
    "ToolsetSealedError": "toolproof.errors",
    "UsageError": "toolproof.errors",
    "VerificationError": "toolproof.errors",
    "ExtensionKind": "toolproof.extensions",
    "extension": "toolproof.extensions",
    "transformer": "toolproof.extensions",
    "wrapper": "toolproof.extensions",
    "ApprovalPolicy": "toolproof.extensions.approvals",
    "ApprovalRequest": "toolproof.extensions.approvals",
    "ApprovalStore": "toolproof.extensions.approvals",
    "Approver": "toolproof.extensions.approvals",
    "Decision": "toolproof.extensions.approvals",
    "canonical_json": "toolproof.identity",
    "content_id": "toolproof.identity",
    "digest": "toolproof.identity",
    "replay_run": "toolproof.runs.replay",
    "execute_run": "toolproof.runs.run",
    "load_spec": "toolproof.runs.spec",
    "Audio": "toolproof.tools.content",
    "EmbeddedResource": "toolproof.tools.content",
    "Image": "toolproof.tools.content",
    "ResourceLink": "toolproof.tools.content",
    "Context": "toolproof.tools.context",
    "ToolContribution": "toolproof.tools.declared",
    "bind_contribution": "toolproof.tools.declared",
    "declarable_field": "toolproof.tools.declared",
    "tool": "toolproof.tools.function",
    "SchemaLimits": "toolproof.schema.limits",
    "prompt": "toolproof.tools.python_catalog",
    "resource": "toolproof.tools.python_catalog",
    "Tool": "toolproof.tools.tool",
    "Toolset": "toolproof.tools.toolset",
    "verify_run": "toolproof.verify.verifier",
}
"""Public name -> the module that defines it (loaded on first access)."""

_MOVED: dict[str, str] = {
    "Claim": "toolproof.contract",
    "EvidenceRecord": "toolproof.contract",
    "ExecutionRuntime": "toolproof.contract",
    "SupportRef": "toolproof.contract",
    "ToolDescriptor": "toolproof.contract",
    "ToolsetDescriptor": "toolproof.contract",
    "Check": "toolproof.plugins",
    "CheckSpec": "toolproof.plugins",
    "Finding": "toolproof.plugins",
    "PluginDescriptor": "toolproof.plugins",
    "ReasonerRequest": "toolproof.plugins",
    "RuntimePlugin": "toolproof.plugins",
    "Severity": "toolproof.plugins",
    "register_check": "toolproof.plugins",
    "register_reasoner": "toolproof.plugins",
}
"""Names that left the top level -> their home; still served here, with a DeprecationWarning."""

_RENAMED: dict[str, tuple[str, str]] = {
    "ReasonerBackend": ("toolproof.plugins", "Reasoner"),
    "RetrievalBackend": ("toolproof.plugins", "Retriever"),
}
"""Names that left the top level under a new name -> (home, new name); served with a warning."""


def __getattr__(name: str) -> Any:
    """Load a public name's module on first access; serve a moved name with a warning.

    Raises:
        AttributeError: no such public name.

    """
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(import_module(home), name)
        globals()[name] = value  # later accesses skip this function
        return value
    moved = _MOVED.get(name)
    if moved is not None:
        warnings.warn(
            f"toolproof.{name} moved to {moved}: use `from {moved} import {name}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(moved), name)
    renamed = _RENAMED.get(name)
    if renamed is not None:
        home, new = renamed
        warnings.warn(
            f"toolproof.{name} is now {home}.{new}: use `from {home} import {new}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(home), new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``__all__``), loaded or not."""
    return sorted(__all__)
