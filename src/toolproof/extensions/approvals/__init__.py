"""Approvals (DESIGN §13): the policy, the durable store, requests and decisions.

The ``approve`` wrapper itself is :mod:`toolproof.extensions.wrappers.approve`.
"""

from toolproof.extensions.approvals.policy import ApprovalPolicy, ApprovalRule, compile_rules
from toolproof.extensions.approvals.request import (
    ApprovalRequest,
    Approver,
    Decision,
    approver_name,
)
from toolproof.extensions.approvals.store import ApprovalStore, StoredRequest

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRule",
    "ApprovalStore",
    "Approver",
    "Decision",
    "StoredRequest",
    "approver_name",
    "compile_rules",
]
