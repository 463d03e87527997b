"""Reasoners: derive typed claims, with byte-exact supports, from a run's evidence.

A :class:`Reasoner` receives a :class:`ReasonerRequest` (the task, every
evidence record registered so far with the store to read and cite it, and every
step's output) and returns claims. It reports ``insufficient_evidence`` instead of
inventing: a claim it cannot ground gets that status and no supports. A run finds
its reasoner by the spec's ``[reasoner] name`` in the :class:`ReasonerRegistry` it
is given: classes added in code, then the ``toolproof.reasoners`` entry-point
group. Their name, version, a digest of their parameters and whether they are
deterministic (and what varies) go into the runtime descriptor.

A reasoner that needs a model or any other provider calls it through
``request.call_tool`` (a tool of the run's Toolset): the call is recorded like a
step's call, and frozen replay serves the recorded result instead of calling it.

Built in here: ``tool-results`` (:class:`ToolResultReasoner`), a small
deterministic reasoner that fills claim templates with values from tool results and
cites the exact bytes of each value inside the result's evidence file.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, overload

from toolproof.contract.evidence import (
    Citation,
    Claim,
    ClaimStatus,
    ClaimType,
    EvidenceRecord,
    SupportRef,
)
from toolproof.contract.runs import ReasonerDescriptor, ReasonerSpec
from toolproof.contract.tools import ToolResult
from toolproof.contract.trace import TraceEvent
from toolproof.errors import InputError
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import digest_json
from toolproof.plugins.loading import plugin_error
from toolproof.plugins.registry import REGISTERED, Registry

__all__ = [
    "PLACEHOLDER",
    "ProviderCall",
    "ProviderNeed",
    "Reasoner",
    "ReasonerRegistry",
    "ReasonerRequest",
    "StepOutput",
    "register_reasoner",
    "retrieve_question",
]


@dataclass(frozen=True)
class StepOutput:
    """What one executed step produced, as the reasoner sees it.

    Attributes:
        step: the step id.
        ok: whether the step finished ok.
        value: the step's JSON value (a tool call's result value).
        evidence: the evidence the step registered, in order.
        reason: why the step is not ok (a failure message), or ``""``.
        arguments: what the step's caller chose, for a step whose result could echo it:
            a tool call's arguments, a read's ``{"uri": ...}``, a prompt's arguments;
            ``None`` for other steps. A quote of result bytes that repeat them
            supports nothing (:mod:`toolproof.evidence.echoes`).
        model_call_id: the id the agent's model gave a tool call step's call (its
            ``tool_called`` event's ``model_call_id``), which an answer may cite it by;
            ``None`` when none was recorded.

    """

    step: str
    ok: bool
    value: Any = None
    evidence: tuple[EvidenceRecord, ...] = ()
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    model_call_id: str | None = None


def retrieve_question(output: StepOutput) -> str | None:
    """The query of a retrieve step's output (``{"query", "hits", ...}``), else ``None``.

    Args:
        output: one step's output.

    Returns:
        The query string when the step finished ok with a retrieval value; ``None``
        for any other step (a tool call, a failed step).

    """
    value = output.value
    if output.ok and isinstance(value, dict) and isinstance(value.get("hits"), list):
        query = value.get("query")
        return query if isinstance(query, str) else None
    return None


ProviderCall = Callable[[str, dict[str, Any]], Awaitable[tuple[ToolResult, EvidenceRecord | None]]]
"""``await call_tool(tool, arguments)``: a recorded call of a Toolset tool (a model,
a clock); returns the result and, on success, the evidence record of its value."""


@dataclass(frozen=True)
class ProviderNeed:
    """A provider a reasoner reaches through ``call_tool``, built for it by the runtime.

    The reasoner layer cannot build tools (it sits below them); it declares what it
    needs and the run assembles the tool (:mod:`toolproof.runs.providers`), records its
    identity in ``runtime.json`` (``providers``, kind ``model``) and serves its calls
    frozen on replay like every other call.

    Attributes:
        name: the tool name the reasoner calls (``llm.chat``); must not be a tool of
            the run's Toolset.
        kind: what to build: ``openai-chat`` (an OpenAI-compatible Chat Completions
            endpoint, :mod:`toolproof.sources.chat_provider`).
        config: the builder's settings (``base_url``, ``api_key_env`` — the variable's
            name, never the key —, ``timeout_seconds``, ``max_retries``).

    """

    name: str
    kind: str
    config: Mapping[str, Any]


async def _no_provider(tool: str, arguments: dict[str, Any]) -> tuple[ToolResult, None]:
    raise InputError(f"this reasoner request has no provider port; cannot call {tool!r}", tool=tool)


@dataclass(frozen=True)
class ReasonerRequest:
    """The input of a reasoner.

    Attributes:
        task: the spec's task.
        min_supports: supports a derived claim needs to be ``validated``.
        evidence: every evidence record registered in the run, in order.
        outputs: every executed step's output, by step id.
        store: the run's evidence store: ``read``, ``support``, ``find``.
        call_tool: the only way to reach a provider (see :data:`ProviderCall`); live it
            calls the tool, frozen it serves the recorded result (an unrecorded call
            refuses the replay).
        mode: ``live`` or ``frozen``.

    """

    task: str
    min_supports: int
    evidence: tuple[EvidenceRecord, ...]
    outputs: Mapping[str, StepOutput]
    store: EvidenceStore
    call_tool: ProviderCall = _no_provider
    mode: str = "live"


class Reasoner(ABC):
    """A derivation strategy. Subclasses set ``name`` and ``version`` and implement ``derive``.

    Args:
        spec: the spec's reasoner section; ``params`` are checked by
            :meth:`check_params` (override it; the default accepts none).

    Raises:
        InputError: the parameters are invalid (unknown keys included).

    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    deterministic: ClassVar[bool] = True
    """False when the same evidence can give other claims (a model, a clock)."""
    varies: ClassVar[tuple[str, ...]] = ()
    """What varies when not deterministic (``"model"``, ``"clock"``)."""

    def __init__(self, spec: ReasonerSpec) -> None:
        self.spec = spec
        self.check_params(dict(spec.params))

    def check_params(self, params: dict[str, Any]) -> None:
        """Validate the reasoner's parameters; the default accepts none.

        Raises:
            InputError: a parameter is unknown or invalid.

        """
        if params:
            raise InputError(
                f"reasoner {self.name!r} takes no params (got {sorted(params)})",
                reasoner=self.name,
            )

    def providers(self) -> tuple[ProviderNeed, ...]:
        """The providers this reasoner calls through ``call_tool`` (default: none)."""
        return ()

    def config(self) -> dict[str, Any]:
        """What the descriptor's ``config_digest`` covers: ``min_supports`` and ``params``.

        Override to add what the parameters only point at (the digest of a prompt
        file), so that a change of it changes the run's identity.
        """
        return {"min_supports": self.spec.min_supports, "params": dict(self.spec.params)}

    def describe_change(self, events: Iterable[TraceEvent]) -> str:
        """Why this reasoner's configuration differs from the recorded run's (replay's message).

        Args:
            events: the recorded trace, in order (read once; a replay streams it), where a
                reasoner's provider calls show what it sent.

        Returns:
            The differing fields, or ``""`` when the reasoner cannot tell (the default).

        """
        return ""

    def descriptor(self) -> ReasonerDescriptor:
        """Name, version and the digest of :meth:`config`."""
        config = self.config()
        return ReasonerDescriptor(
            name=self.name,
            version=self.version,
            config_digest=digest_json(config),
            deterministic=self.deterministic,
            varies=list(self.varies),
        )

    @property
    def label(self) -> str:
        """``name/version``, recorded on every claim."""
        return f"{self.name}/{self.version}"

    def validated(
        self,
        statement: str,
        supports: list[SupportRef],
        citations: list[Citation],
        *,
        confidence: float = 1.0,
        reason: str = "",
    ) -> Claim:
        """A derived claim with status ``validated``, labelled with this reasoner."""
        return Claim(
            statement=statement,
            type=ClaimType.DERIVED,
            status=ClaimStatus.VALIDATED,
            supports=supports,
            citations=citations,
            confidence=confidence,
            reasoner=self.label,
            reason=reason,
        )

    def filled(
        self,
        statement: str,
        values: Mapping[str, str],
        supports: list[SupportRef],
        citations: list[Citation],
        min_supports: int,
    ) -> Claim:
        """A claim template filled in: ``{name}`` placeholders replaced by ``values``.

        Validated with these supports, or ``insufficient_evidence`` (the template left
        unfilled) when they are fewer than ``min_supports``.
        """
        if len(supports) < min_supports:
            return self.insufficient(
                statement, f"{len(supports)} supports, fewer than min_supports = {min_supports}"
            )
        text = PLACEHOLDER.sub(lambda m: values[m.group(1)], statement)
        return self.validated(text, supports, citations)

    def insufficient(self, statement: str, reason: str) -> Claim:
        """A derived claim with status ``insufficient_evidence``: no supports, nothing asserted."""
        return Claim(
            statement=statement,
            type=ClaimType.DERIVED,
            status=ClaimStatus.INSUFFICIENT_EVIDENCE,
            confidence=0.0,
            reasoner=self.label,
            reason=reason,
        )

    @abstractmethod
    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """Return the claims the evidence supports (``insufficient_evidence`` where it doesn't)."""


class ReasonerRegistry(Registry[type[Reasoner]]):
    """Reasoner classes by name: registered in code, then ``toolproof.reasoners`` entry points.

    A new registry is empty; the composition root builds the one a run uses with the
    built-in reasoners (:func:`toolproof.evidence.builtin_reasoners.reasoner_registry`)
    and passes it down.
    """

    def __init__(self) -> None:
        super().__init__("reasoner")

    def accept(self, name: str, item: object, origin: str) -> type[Reasoner]:
        """An entry point's object must be a :class:`Reasoner` subclass named ``name``.

        Raises:
            InputError: it is not (naming the plugin, its origin and the rule).

        """
        if not (isinstance(item, type) and issubclass(item, Reasoner)):
            rule = f"the entry point is {item!r}, not a Reasoner subclass"
            raise plugin_error("reasoner", name, origin, rule)
        if getattr(item, "name", None) != name:
            rule = f"its class declares name {getattr(item, 'name', None)!r}, not {name!r}"
            raise plugin_error("reasoner", name, origin, rule)
        return item

    def add(self, cls: type[Reasoner]) -> type[Reasoner]:
        """Register ``cls`` under ``cls.name``; registering the same class again is a no-op.

        Returns:
            ``cls``.

        Raises:
            InputError: another class is registered under that name.

        """
        return self.register(cls.name, cls)

    def create(self, spec: ReasonerSpec) -> Reasoner:
        """Build the reasoner ``spec`` names, with its parameters.

        Raises:
            InputError: unknown reasoner name (the message lists the registered ones), bad
                params, or a broken plugin (naming it, its origin and the rule).

        """
        found = self.find(spec.name)
        if found is None:
            known = ", ".join(self.names())
            raise InputError(
                f"unknown reasoner {spec.name!r} (known: {known}; none installed under that name "
                "in the 'toolproof.reasoners' entry-point group)",
                reasoner=spec.name,
            )
        cls, origin = found
        if origin == REGISTERED:
            return cls(spec)
        try:
            return cls(spec)
        except InputError:
            raise
        except Exception as exc:  # foreign constructor: report it, naming the plugin
            rule = f"building it raised {type(exc).__name__}: {exc}"
            raise plugin_error("reasoner", spec.name, origin, rule) from exc


@overload
def register_reasoner(
    cls: type[Reasoner], /, *, registry: ReasonerRegistry | None = None
) -> type[Reasoner]: ...


@overload
def register_reasoner(
    *, registry: ReasonerRegistry | None = None
) -> Callable[[type[Reasoner]], type[Reasoner]]: ...


def register_reasoner(
    cls: type[Reasoner] | None = None, /, *, registry: ReasonerRegistry | None = None
) -> type[Reasoner] | Callable[[type[Reasoner]], type[Reasoner]]:
    """Declare a reasoner class: check it, add it to ``registry`` when given, return it.

    ``@register_reasoner`` on a class checks it (a :class:`Reasoner` subclass
    with a ``name``) and returns it unchanged: it registers nothing by itself, there
    is no process-wide registry. A plugin package names the class in the
    ``toolproof.reasoners`` entry-point group; code that builds its own registry
    writes ``@register_reasoner(registry=reasoners)`` or calls
    ``reasoners.add(cls)``, and passes ``reasoners`` to the run.

    Args:
        cls: the class (omit it to get a decorator taking ``registry``).
        registry: the registry to add the class to (default: none).

    Returns:
        ``cls``, or a decorator returning its class.

    Raises:
        InputError: ``cls`` is not a Reasoner subclass with a ``name``, or
            ``registry`` holds another class under that name.

    """

    def declare(item: type[Reasoner]) -> type[Reasoner]:
        if not (isinstance(item, type) and issubclass(item, Reasoner)):
            raise InputError(f"register_reasoner: {item!r} is not a Reasoner subclass")
        name = getattr(item, "name", None)
        if not isinstance(name, str) or not name:
            raise InputError(f"register_reasoner: {item.__name__} sets no name", rule="name")
        return item if registry is None else registry.add(item)

    return declare if cls is None else declare(cls)


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A ``{name}`` placeholder in a claim template."""
