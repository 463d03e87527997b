"""The built-in wrappers: retry, timeout, cache, rate_limit, audit, approve."""

from toolproof.extensions.wrappers.approve import APPROVE_RESERVED, approve_factory
from toolproof.extensions.wrappers.audit import AuditConfig, audit_factory
from toolproof.extensions.wrappers.cache import CacheConfig, cache_factory
from toolproof.extensions.wrappers.rate_limit import RateLimitConfig, rate_limit_factory
from toolproof.extensions.wrappers.retry import RetryConfig, retry_factory
from toolproof.extensions.wrappers.timeout import TIMEOUT_RESERVED, TimeoutConfig, timeout_factory

__all__ = [
    "APPROVE_RESERVED",
    "TIMEOUT_RESERVED",
    "AuditConfig",
    "CacheConfig",
    "RateLimitConfig",
    "RetryConfig",
    "TimeoutConfig",
    "approve_factory",
    "audit_factory",
    "cache_factory",
    "rate_limit_factory",
    "retry_factory",
    "timeout_factory",
]
