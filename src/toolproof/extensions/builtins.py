"""The built-in extensions, registered in every :class:`ExtensionRegistry` by default.

Backends (``process``, ``celery``) register from :mod:`toolproof.backends` through
the same registry (see ``docs/extensions.md``).
"""

from __future__ import annotations

from toolproof.extensions.approvals.policy import ApprovalPolicy
from toolproof.extensions.extension import Extension
from toolproof.extensions.kinds import ExtensionKind
from toolproof.extensions.transformers import (
    ArgsConfig,
    ProjectConfig,
    args_factory,
    project_factory,
)
from toolproof.extensions.wrappers import (
    APPROVE_RESERVED,
    TIMEOUT_RESERVED,
    AuditConfig,
    CacheConfig,
    RateLimitConfig,
    RetryConfig,
    TimeoutConfig,
    approve_factory,
    audit_factory,
    cache_factory,
    rate_limit_factory,
    retry_factory,
    timeout_factory,
)

__all__ = ["BUILTINS", "BUILTIN_VERSION"]

BUILTIN_VERSION = "1"
"""The version recorded in the stack layers of built-in extensions."""

_WRAPPER = ExtensionKind.WRAPPER
_TRANSFORMER = ExtensionKind.TRANSFORMER

BUILTINS: tuple[Extension, ...] = (
    Extension(
        factory=retry_factory,
        kind=_WRAPPER,
        name="retry",
        config=RetryConfig,
        version=BUILTIN_VERSION,
        description="Retry listed failure kinds with exponential backoff and jitter.",
        origin="builtin",
    ),
    Extension(
        factory=timeout_factory,
        kind=_WRAPPER,
        name="timeout",
        config=TimeoutConfig,
        reserved_params=TIMEOUT_RESERVED,
        version=BUILTIN_VERSION,
        description="Cancel the body after 'seconds'; a caller may lower it with timeout_s.",
        origin="builtin",
    ),
    Extension(
        factory=cache_factory,
        kind=_WRAPPER,
        name="cache",
        config=CacheConfig,
        version=BUILTIN_VERSION,
        description="Serve repeated successful calls from memory or a SQLite file.",
        wants_context=True,
        origin="builtin",
    ),
    Extension(
        factory=rate_limit_factory,
        kind=_WRAPPER,
        name="rate_limit",
        config=RateLimitConfig,
        version=BUILTIN_VERSION,
        description="Token bucket per variant: calls over the rate wait, none is dropped.",
        origin="builtin",
    ),
    Extension(
        factory=audit_factory,
        kind=_WRAPPER,
        name="audit",
        config=AuditConfig,
        version=BUILTIN_VERSION,
        description="Append one JSON line per call to a file, with argument redaction.",
        wants_context=True,
        origin="builtin",
    ),
    Extension(
        factory=approve_factory,
        kind=_WRAPPER,
        name="approve",
        config=ApprovalPolicy,
        reserved_params=APPROVE_RESERVED,
        runs_at_admission=True,
        version=BUILTIN_VERSION,
        description="Ask a person before the body runs; the decision is bound to the arguments.",
        wants_context=True,
        origin="builtin",
    ),
    Extension(
        factory=args_factory,
        kind=_TRANSFORMER,
        name="args",
        config=ArgsConfig,
        version=BUILTIN_VERSION,
        description="Rename, hide (pin), default or describe parameters, like a partial.",
        origin="builtin",
    ),
    Extension(
        factory=project_factory,
        kind=_TRANSFORMER,
        name="project",
        config=ProjectConfig,
        version=BUILTIN_VERSION,
        description="Reshape the result with a JMESPath expression; declares its output schema.",
        origin="builtin",
    ),
)
