"""Run models: spec, plan, runtime, check results, report, manifest and timings.

A :class:`RunSpec` is what the user writes; the planner turns it into a
:class:`Plan` (content id ``plan_<hex>``); an :class:`ExecutionRuntime` (content id
``runtime_<hex>``) says how it ran; the ordered checks produce a :class:`Report`
(content id ``report_<hex>``, covering the check sequence and every finding); the
:class:`Manifest` lists every file of the run directory and fixes the run id.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import (
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from toolproof.contract.base import CanonicalModel, ContentModel
from toolproof.contract.forks import ForkedFrom
from toolproof.contract.layout import TIMINGS_FILE
from toolproof.contract.tools import PresentedTools, ToolsetDescriptor
from toolproof.identity import content_id, digest_json

__all__ = [
    "MODEL_PROVIDER_KIND",
    "RESERVED_STEP_IDS",
    "RUN_ID_RE",
    "STEP_ID_RE",
    "Budgets",
    "CheckResult",
    "CheckSpec",
    "CheckStatus",
    "ExecutionRuntime",
    "Finding",
    "Manifest",
    "ManifestEntry",
    "Plan",
    "PlanNode",
    "PluginDescriptor",
    "Policy",
    "ReasonerDescriptor",
    "ReasonerSpec",
    "Report",
    "RunSpec",
    "Severity",
    "StepKind",
    "StepSpec",
    "Timings",
    "files_digest_for",
    "run_id_for",
]

STEP_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
"""What a step id must match."""
RESERVED_STEP_IDS = frozenset({"derive", "verify", "finalize"})
"""Node ids the planner adds itself; a spec step may not use them."""
RUN_ID_RE = re.compile(r"^run_[0-9a-f]{64}$")
"""A run id: ``run_`` + SHA-256 hex."""


class StepKind(StrEnum):
    """The kinds of plan nodes."""

    CALL = "call"
    RETRIEVE = "retrieve"
    MODEL = "model"
    READ = "read"
    PROMPT = "prompt"
    DERIVE = "derive"
    VERIFY = "verify"
    FINALIZE = "finalize"


class Policy(StrEnum):
    """Which finding severities make a report fail.

    ``strict``: warning, error and critical; ``audit``: error and critical (warnings
    are reported); ``permissive``: critical only (integrity), everything else reported.
    """

    STRICT = "strict"
    AUDIT = "audit"
    PERMISSIVE = "permissive"

    def fails(self, severity: Severity) -> bool:
        """Whether a finding of ``severity`` makes the report fail under this policy."""
        floor = {"strict": 1, "audit": 2, "permissive": 3}[self.value]
        return severity.rank >= floor


class Severity(StrEnum):
    """How bad a finding is: ``info`` < ``warning`` < ``error`` < ``critical``."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for info up to 3 for critical."""
        return ("info", "warning", "error", "critical").index(self.value)


class Budgets(CanonicalModel):
    """Limits enforced while a run executes; ``None`` means unlimited.

    Attributes:
        wall_seconds: wall-clock seconds for the whole run (a running call is cancelled).
        evidence_bytes: total bytes of evidence registered.
        tool_calls: number of tool calls.

    """

    wall_seconds: float | None = Field(default=None, gt=0)
    evidence_bytes: int | None = Field(default=None, ge=0)
    tool_calls: int | None = Field(default=None, ge=0)


class StepSpec(CanonicalModel):
    """One step of a spec.

    Attributes:
        id: the step id (``^[A-Za-z][A-Za-z0-9_-]{0,63}$``; not ``derive``,
            ``verify`` or ``finalize``).
        kind: ``call`` (a tool call), ``retrieve`` (served by a retriever),
            ``model`` (a model turn of an agent session, served from its recording),
            ``read`` (an MCP resource read, ``params = {"uri"}``) or ``prompt`` (an MCP
            prompt get, ``params = {"name", "arguments"}``).
        tool: for ``call``, the tool or variant name.
        arguments: for ``call``, the JSON arguments; ``{"$ref": "steps.ID.value..."}``
            anywhere inside is replaced by an earlier step's result.
        after: ids of steps that must run first (references add these implicitly).
        params: for ``retrieve``, the retriever's parameters; for ``read`` and
            ``prompt``, what is read or fetched.

    """

    id: str
    kind: Literal["call", "retrieve", "model", "read", "prompt"] = "call"
    tool: str | None = None
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    after: list[str] = Field(default_factory=list)
    params: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _step_id(cls, value: str) -> str:
        if STEP_ID_RE.match(value) is None:
            raise ValueError(f"step id {value!r} must match {STEP_ID_RE.pattern}")
        if value in RESERVED_STEP_IDS:
            raise ValueError(f"step id {value!r} is reserved for the planner's own nodes")
        return value

    @model_validator(mode="after")
    def _call_has_tool(self) -> Self:
        if self.kind == "call" and not self.tool:
            raise ValueError(f"step {self.id!r}: a call step needs 'tool'")
        return self


class ReasonerSpec(CanonicalModel):
    """The reasoner of a run and its parameters.

    Attributes:
        name: the registered reasoner name (``tool-results`` is built in).
        min_supports: supports a derived claim needs to be ``validated``.
        params: the reasoner's own parameters (checked by the reasoner; unknown keys
            refused there).

    """

    name: str = "tool-results"
    min_supports: int = Field(default=1, ge=1)
    params: dict[str, JsonValue] = Field(default_factory=dict)


class CheckSpec(CanonicalModel):
    """An additional check a spec asks for (``[[checks]]``), run after the built-ins.

    Attributes:
        name: the check's registered name or ``toolproof.checks`` entry-point name.
        params: the check's own parameters (a check factory receives them).

    """

    name: str = Field(min_length=1)
    params: dict[str, JsonValue] = Field(default_factory=dict)


class RunSpec(CanonicalModel):
    """What to run: the user's spec (TOML or JSON), stored as ``spec.json``.

    Attributes:
        task: what the run is for, in words.
        toolset: the composition root (``toolproof.toml``), relative POSIX to the spec file.
        steps: the steps, in the order written.
        reasoner: the reasoner and its parameters.
        assumptions: statements recorded as ``assumed`` claims.
        policy: the check policy.
        budgets: limits enforced while running.
        seed: the seed handed to the runtime (recorded; tools may use it).
        checks: additional checks, run after the built-in sequence in this order.

    """

    task: str
    toolset: str = "toolproof.toml"
    steps: list[StepSpec] = Field(default_factory=list)
    reasoner: ReasonerSpec = Field(default_factory=ReasonerSpec)
    assumptions: list[str] = Field(default_factory=list)
    policy: Policy = Policy.STRICT
    budgets: Budgets = Field(default_factory=Budgets)
    seed: int = 0
    checks: list[CheckSpec] = Field(default_factory=list)


class PlanNode(CanonicalModel):
    """One node of a plan.

    Attributes:
        id: the node id (a step id, or ``derive``/``verify``/``finalize``).
        kind: the step kind.
        tool: for ``call``, the tool name.
        arguments: for ``call``, the arguments with references unresolved.
        params: for ``retrieve``, the retrieval parameters.
        depends_on: node ids that run before this one, sorted.

    """

    id: str
    kind: StepKind
    tool: str | None = None
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    params: dict[str, JsonValue] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)


class Plan(ContentModel):
    """The content-addressed plan: nodes in execution order, and the edges between them.

    Attributes:
        planner: the planner's name and version.
        task: the spec's task.
        nodes: the nodes, in the deterministic execution order.
        edges: ``[from, to]`` pairs (``from`` runs before ``to``), sorted.

    """

    ID_KIND = "plan"

    planner: str
    task: str
    nodes: list[PlanNode]
    edges: list[list[str]] = Field(default_factory=list)

    def node(self, node_id: str) -> PlanNode:
        """The node ``node_id``.

        Raises:
            KeyError: no such node.

        """
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


class ReasonerDescriptor(CanonicalModel):
    """A reasoner's identity: name, version and a digest of its configuration.

    Attributes:
        name: the registered name.
        version: the implementation version (bump it when its output changes).
        config_digest: ``sha256:`` of its configuration (``min_supports``, ``params``).
        deterministic: False when its output can vary for the same evidence (a model).
        varies: what varies when not deterministic (``"model"``, ``"clock"``).

    """

    name: str
    version: str
    config_digest: str
    deterministic: bool = True
    varies: list[str] = Field(default_factory=list)


class PluginDescriptor(CanonicalModel):
    """The stable identity of a plugged-in part (a check, a retriever, a runtime plugin).

    Attributes:
        kind: the seam (``check``, ``retrieval``, ``runtime``).
        name: the plugin's name (a check's id).
        version: the implementation version; bump it when behaviour changes.
        config_digest: ``sha256:`` of its configuration (parameters, corpus, index...).
        origin: the distribution or module that provided it (``toolproof`` for built-ins).

    """

    kind: str
    name: str
    version: str
    config_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    origin: str = "toolproof"


MODEL_PROVIDER_KIND = "model"
"""The ``kind`` of a model provider in ``ExecutionRuntime.providers``: a tool a reasoner
calls through its port (``llm.chat``), not a tool of the Toolset; its calls vary."""


class ExecutionRuntime(ContentModel):
    """How a run executed; its content id is ``runtime_<hex>``.

    Attributes:
        kind: the runtime kind (``local``).
        mode: ``live`` (tools called) or ``frozen`` (recorded results served).
        toolset: the Toolset descriptor (names, versions, fingerprints of every tool).
        reasoner: the reasoner's identity.
        seed: the seed.
        checks: the identity of every additional check, in the order it runs.
        providers: other plugged-in parts (a runtime plugin), sorted by kind and name.
        session: the id of the recording session the run was recorded in (the id its
            calls' idempotency keys name: :mod:`toolproof.tools.idempotency`), or
            ``None`` (a plan run; absent from the JSON, so such runtimes keep their id).
        repeatable: for a recording session, each tool (and variant) that declares a
            call may run again harmlessly, by name: ``read_only`` (``readOnlyHint``),
            ``idempotent`` (``idempotentHint``) or ``key`` (``idempotency = "key"``),
            the first that holds; a tool not named declares none (``acted-once`` holds
            its calls to one execution per key). ``None`` (absent): not recorded.
        presented: an agent session's tools as presented to its framework (what its
            frozen replay presents again), or ``None`` (absent from the JSON).
        forked_from: a fork's parent run and divergence, or ``None`` (absent).

    """

    ID_KIND = "runtime"

    kind: str = "local"
    mode: Literal["live", "frozen"] = "live"
    toolset: ToolsetDescriptor
    reasoner: ReasonerDescriptor
    seed: int = 0
    checks: list[PluginDescriptor] = Field(default_factory=list)
    providers: list[PluginDescriptor] = Field(default_factory=list)
    session: str | None = Field(default=None, min_length=1)
    repeatable: dict[str, Literal["read_only", "idempotent", "key"]] | None = None
    presented: PresentedTools | None = None
    forked_from: ForkedFrom | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_session(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("session", "repeatable", "presented", "forked_from"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


CheckStatus = Literal["passed", "failed", "skipped"]


class Finding(CanonicalModel):
    """One problem a check found.

    Attributes:
        severity: how bad it is.
        file: the run-directory file it concerns (relative POSIX), or ``""``.
        message: what is wrong and what to do about it.
        detail: structured detail (event index, evidence id, offsets...).

    """

    severity: Severity
    file: str = ""
    message: str
    detail: dict[str, JsonValue] = Field(default_factory=dict)


class CheckResult(CanonicalModel):
    """The result of one check of the ordered sequence.

    Attributes:
        check: the stable check id (``trace-chain``).
        invariant: the stable invariant id (``INV-TRACE-CHAIN``).
        severity: the check's default severity.
        status: ``passed``, ``failed`` (it has findings) or ``skipped`` (it could not run).
        findings: what it found, in a deterministic order.

    """

    check: str
    invariant: str
    severity: Severity
    status: CheckStatus
    findings: list[Finding] = Field(default_factory=list)


class Report(ContentModel):
    """The verification report; its id (``report_<hex>``) covers sequence and findings.

    Attributes:
        policy: the policy applied.
        sequence: the check ids, in the order they ran.
        results: one result per check, in that order.
        outcome: ``passed`` unless a finding's severity fails under the policy.

    """

    ID_KIND = "report"

    policy: Policy
    sequence: list[str]
    results: list[CheckResult]
    outcome: Literal["passed", "failed"]

    def failing(self) -> list[tuple[CheckResult, Finding]]:
        """Every (check, finding) whose severity fails under the report's policy."""
        return [
            (result, finding)
            for result in self.results
            for finding in result.findings
            if self.policy.fails(finding.severity)
        ]


class ManifestEntry(CanonicalModel):
    """One file of a run directory: relative POSIX path, size in bytes, digest."""

    path: str
    size: int = Field(ge=0)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")


def run_id_for(entries: list[ManifestEntry]) -> str:
    """The run id: ``run_<hex>`` over the canonical JSON of every entry but ``timings.json``.

    Wall-clock times live only in ``timings.json``, so identical work gets an identical id.
    """
    covered = [entry.to_json() for entry in entries if entry.path != TIMINGS_FILE]
    return content_id("run", covered)


def files_digest_for(entries: list[ManifestEntry]) -> str:
    """The digest of the canonical JSON of every entry, ``timings.json`` included."""
    return digest_json([entry.to_json() for entry in entries])


class Manifest(CanonicalModel):
    """``manifest.json``: every other file of the run directory, and the run id.

    Attributes:
        run_id: :func:`run_id_for` of ``files``; recomputed and checked on load.
        files: every file but ``manifest.json``, sorted by path.
        files_digest: :func:`files_digest_for` of ``files`` (covers ``timings.json``
            too, so no byte of the manifest can change unnoticed); checked on load.

    """

    run_id: str
    files: list[ManifestEntry]
    files_digest: str = ""

    @model_validator(mode="after")
    def _check_run_id(self) -> Self:
        computed = run_id_for(self.files)
        if self.run_id != computed:
            raise ValueError(f"run_id {self.run_id} does not match its entries ({computed})")
        covered = files_digest_for(self.files)
        if not self.files_digest:
            object.__setattr__(self, "files_digest", covered)
        elif self.files_digest != covered:
            raise ValueError(f"files_digest {self.files_digest} does not match its entries")
        paths = [entry.path for entry in self.files]
        if paths != sorted(set(paths)):
            raise ValueError("manifest entries must be sorted by path and unique")
        return self


class Timings(CanonicalModel):
    """``timings.json``: the only wall-clock data of a run (not part of the run id).

    Attributes:
        started_at: ISO 8601 UTC start time.
        wall_seconds: the run's wall-clock duration in seconds.
        steps: seconds per plan node id.

    """

    started_at: str
    wall_seconds: float = Field(ge=0)
    steps: dict[str, float] = Field(default_factory=dict)
