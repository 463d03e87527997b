"""The built-in reasoners, and the registry a run uses unless it is given another.

Each built-in is defined in its own module on top of
:mod:`toolproof.evidence.reasoners` (which imports none of them); this module,
one step up, names them, so adding them to a registry is an explicit act of the
composition root and importing a module registers nothing.
"""

from __future__ import annotations

from toolproof.evidence.answer import AnswerReasoner
from toolproof.evidence.extractive_reasoner import ExtractiveReasoner
from toolproof.evidence.llm_reasoner import LLMReasoner
from toolproof.evidence.patterns_reasoner import PatternsReasoner
from toolproof.evidence.reasoners import Reasoner, ReasonerRegistry
from toolproof.evidence.tool_results_reasoner import ToolResultReasoner

__all__ = ["BUILTIN_REASONERS", "reasoner_registry"]

BUILTIN_REASONERS: tuple[type[Reasoner], ...] = (
    ToolResultReasoner,
    AnswerReasoner,
    ExtractiveReasoner,
    PatternsReasoner,
    LLMReasoner,
)
"""``tool-results``, ``answer``, ``extractive``, ``patterns`` and ``llm``."""


def reasoner_registry() -> ReasonerRegistry:
    """A new :class:`ReasonerRegistry` holding the built-in reasoners.

    Entry points of the ``toolproof.reasoners`` group are found on lookup; code adds
    its own classes with :meth:`ReasonerRegistry.add`.

    Returns:
        A new registry on every call (no process-wide state).

    """
    registry = ReasonerRegistry()
    for cls in BUILTIN_REASONERS:
        registry.add(cls)
    return registry
