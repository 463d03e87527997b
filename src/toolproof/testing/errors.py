"""The one failure the conformance kit raises: the rule broken, and why."""

from __future__ import annotations

__all__ = ["ConformanceError"]


class ConformanceError(AssertionError):
    """An extension broke a conformance rule.

    An ``AssertionError``, so pytest shows it as a test failure. The message starts
    with ``[rule]``: the rule's id (``kit:failed-call``, or a check's invariant such as
    ``INV-DERIVED-GROUNDED``), then what happened.

    Args:
        rule: the rule's id.
        message: what broke it, and what to do.

    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"[{rule}] {message}")
        self.rule = rule
        self.message = message
