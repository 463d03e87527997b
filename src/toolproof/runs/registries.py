"""The registries a run finds its plugins in: reasoners, checks and execution runtimes.

The composition root builds them (the built-in reasoners added explicitly) and
passes them to :func:`~toolproof.runs.run.execute_run` and
:func:`~toolproof.runs.replay.replay_run`; each seam looks a name up in its own
registry, code-registered items first, then the installed entry points.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.evidence.reasoners import ReasonerRegistry
from toolproof.runs.runtime_plugin import RuntimeRegistry
from toolproof.verify.sequence import CheckRegistry

__all__ = ["RunRegistries"]


@dataclass(frozen=True)
class RunRegistries:
    """Where a run's plugin names resolve, one registry per seam.

    ``RunRegistries()`` holds new registries: the built-in reasoners, no
    code-registered checks or runtimes; every seam also finds its entry points.

    Attributes:
        reasoners: the spec's ``[reasoner] name``.
        checks: the spec's ``[[checks]] name``.
        runtimes: ``execute_run(runtime="name")``.

    """

    reasoners: ReasonerRegistry = field(default_factory=reasoner_registry)
    checks: CheckRegistry = field(default_factory=CheckRegistry)
    runtimes: RuntimeRegistry = field(default_factory=RuntimeRegistry)
