"""Wire models of tools: specs, calls, results, failures and descriptors.

These are the frozen, canonical descriptions of a tool and of one call to it; the
runtime binding (the callable, the compiled validator) lives in
:class:`toolproof.tools.tool.Tool`, as pydantic-ai keeps ``ToolDefinition`` apart
from its toolset tool.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import (
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from toolproof.contract.base import SCHEMA_VERSION, CanonicalModel, ContentModel
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureKindName, FailureWhere, FailureWhereName
from toolproof.identity import digest_json, digest_of_hex

__all__ = [
    "PRESENTED_FORMAT",
    "ExposureRecord",
    "FailureKind",
    "FailureWhere",
    "PresentedTool",
    "PresentedTools",
    "StackLayer",
    "ToolAnnotations",
    "ToolCall",
    "ToolDescriptor",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "ToolsetDescriptor",
]


class ToolAnnotations(CanonicalModel):
    """MCP tool annotations (MCP spec, ``ToolAnnotations``): hints, never guarantees.

    Each hint is tri-state: ``None`` means "not stated", and the MCP default applies
    (read-only false, destructive true, idempotent false, open-world true); the
    ``is_*`` properties apply those defaults.
    """

    title: str | None = None
    readOnlyHint: bool | None = None
    destructiveHint: bool | None = None
    idempotentHint: bool | None = None
    openWorldHint: bool | None = None

    @property
    def is_read_only(self) -> bool:
        """Whether the tool states it does not modify its environment (default False)."""
        return bool(self.readOnlyHint)

    @property
    def is_destructive(self) -> bool:
        """Whether the tool may destroy data (MCP default True; False when read-only)."""
        if self.is_read_only:
            return False
        return True if self.destructiveHint is None else self.destructiveHint

    @property
    def is_idempotent(self) -> bool:
        """Whether repeating a call with the same arguments has no further effect."""
        return bool(self.idempotentHint) or self.is_read_only

    @property
    def is_open_world(self) -> bool:
        """Whether the tool reaches outside entities (web, other systems); default True."""
        return True if self.openWorldHint is None else self.openWorldHint


class ToolSpec(CanonicalModel):
    """The wire description of a tool.

    Attributes:
        name: the tool name (:data:`toolproof.contract.names.TOOL_NAME_PATTERN`, checked
            by the Toolset).
        version: the tool's own version string (``"0"`` when not stated).
        description: what the tool does, for a model or a person.
        input_schema: the JSON Schema (draft 2020-12) of the arguments object; the
            single source of truth for what a call may carry.
        output_schema: the JSON Schema of a successful result value, or ``None``.
        annotations: MCP tool annotations.
        idempotency: ``"key"`` when the body honours the call's idempotency key (acts
            at most once per key: docs/durability.md), so running a call again is
            harmless; ``None`` (absent from the JSON, so the fingerprint of a tool that
            does not declare it is unchanged): not stated.

    """

    name: str
    version: str = "0"
    description: str = ""
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)
    idempotency: Literal["key"] | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_idempotency(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("idempotency") is None:
            data.pop("idempotency", None)
        return data

    @property
    def honours_key(self) -> bool:
        """Whether the tool declares it acts at most once per idempotency key."""
        return self.idempotency == "key"


class ToolFailure(CanonicalModel):
    """A normalized tool failure: never a success, never a bare exception string.

    Attributes:
        kind: what failed (:class:`~toolproof.failures.FailureKind`, each documented in
            :data:`~toolproof.failures.FAILURE_TABLE`); ``invalid_arguments`` means the
            body was not called.
        message: a human-readable message naming the thing and the rule.
        retryable: whether the same call may succeed if tried again (this call's
            judgement; the ``retry`` wrapper's default follows the kind).
        where: where it failed (:class:`~toolproof.failures.FailureWhere`).
        detail: structured detail (``errors`` with JSON paths, ``task_id``, ...).

    """

    kind: FailureKind
    message: str
    retryable: bool = False
    where: FailureWhere = FailureWhere.BODY
    detail: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def type(self) -> FailureKind:
        """Alias of :attr:`kind`."""
        return self.kind


class ToolResult(CanonicalModel):
    """The outcome of one tool call: a JSON value, or a :class:`ToolFailure`.

    Attributes:
        ok: True on success.
        value: the JSON value on success (``None`` on failure).
        failure: the failure, present exactly when ``ok`` is False.

    """

    ok: bool
    value: JsonValue = None
    failure: ToolFailure | None = None

    @model_validator(mode="after")
    def _ok_xor_failure(self) -> Self:
        if self.ok == (self.failure is not None):
            raise ValueError("a ToolResult has a failure exactly when ok is False")
        return self

    @classmethod
    def success(cls, value: Any) -> ToolResult:
        """Build a successful result without re-validating ``value`` (the caller checked it).

        ``value`` is kept as given (a JSON value): the result is a ``model_copy`` of one
        validated successful result (``_SUCCESS``, every field set) with its ``value``
        updated, equal to ``model_construct`` of the four fields (the same fields set),
        in about two thirds of its time (no per-field alias lookup).
        """
        return _SUCCESS.model_copy(update={"value": value})

    @classmethod
    def fail(
        cls,
        kind: FailureKind | FailureKindName,
        message: str,
        *,
        where: FailureWhere | FailureWhereName = FailureWhere.BODY,
        retryable: bool = False,
        detail: dict[str, Any] | None = None,
    ) -> ToolResult:
        """Build a failed result carrying a :class:`ToolFailure` of these fields.

        ``kind`` and ``where`` are members of :class:`~toolproof.failures.FailureKind` and
        :class:`~toolproof.failures.FailureWhere` or their values (``"timeout"``).
        """
        failure = ToolFailure(
            kind=FailureKind(kind),
            message=message,
            where=FailureWhere(where),
            retryable=retryable,
            detail=detail or {},
        )
        return cls.model_construct(
            schema_version=SCHEMA_VERSION, ok=False, value=None, failure=failure
        )

    def unwrap(self) -> JsonValue:
        """Return the value on success.

        Raises:
            ToolCallError: the call failed; ``.failure`` holds the :class:`ToolFailure`.

        """
        if self.failure is not None:
            raise ToolCallError(self.failure)
        return self.value


_SUCCESS = ToolResult(schema_version=SCHEMA_VERSION, ok=True, value=None, failure=None)
"""The successful result whose copies :meth:`ToolResult.success` hands out (value updated)."""


class ToolCall(ContentModel):
    """One call to a tool, as recorded: its content id is ``call_<hex>``.

    Attributes:
        tool: the name of the tool or variant called.
        arguments: the JSON arguments object, exactly as the caller sent it.
        step: the plan step that made the call, when made inside a run.

    """

    ID_KIND = "call"

    tool: str
    arguments: dict[str, JsonValue]
    step: str | None = None


class StackLayer(CanonicalModel):
    """One extension layer of a variant, innermost first in a descriptor's stack.

    Attributes:
        name: the extension's registered name.
        kind: ``wrapper``, ``transformer`` or ``backend``.
        version: the extension's version.
        config_digest: ``sha256:...`` of the canonical JSON of its config (``{}`` if none).

    """

    name: str
    kind: str
    version: str = "0"
    config_digest: str


class ToolDescriptor(CanonicalModel):
    """What the runtime records about a tool or variant: enough to notice any change.

    Attributes:
        name: the tool or variant name.
        version: the tool's version.
        fingerprint: ``sha256:...`` over the spec, the source and the stack; any
            change of schema, description, source configuration or extension config
            changes it.
        source: where the tool came from (``python:pkg.mod.fn``, ``mcp:git``...).
        base: the base tool's name for a variant (``None`` for a base tool).
        stack: the extension layers of a variant, innermost first.
        deterministic: False when the tool's results vary between identical calls.
        varies: what varies (``clock``, ``network``...) when not deterministic.

    """

    name: str
    version: str
    fingerprint: str
    source: str = ""
    base: str | None = None
    stack: list[StackLayer] = Field(default_factory=list)
    deterministic: bool = True
    varies: list[str] = Field(default_factory=list)

    @classmethod
    def for_spec(
        cls,
        spec: ToolSpec,
        *,
        source: str = "",
        base: str | None = None,
        stack: list[StackLayer] | None = None,
        deterministic: bool = True,
        varies: list[str] | None = None,
    ) -> ToolDescriptor:
        """Build the descriptor of ``spec``; the fingerprint covers every argument."""
        layers = list(stack or [])
        varying = list(varies or [])
        fingerprint = digest_json(
            {
                "spec": spec.to_json(),
                "source": source,
                "base": base,
                "stack": [layer.to_json() for layer in layers],
                "deterministic": deterministic,
                "varies": varying,
            }
        )
        return cls(
            name=spec.name,
            version=spec.version,
            fingerprint=fingerprint,
            source=source,
            base=base,
            stack=layers,
            deterministic=deterministic,
            varies=varying,
        )


class ExposureRecord(CanonicalModel):
    """What a Toolset hides from its outward faces (``serve``, sessions, run specs).

    Attributes:
        expose: the ``[serve] expose`` globs.
        hide: the ``[serve] hide`` globs.
        hidden: the tool names hidden, sorted.

    """

    expose: list[str] = Field(default_factory=list)
    hide: list[str] = Field(default_factory=list)
    hidden: list[str] = Field(default_factory=list)


PRESENTED_FORMAT: Literal[1] = 1
"""The version of :class:`PresentedTools` this toolproof writes and reads."""


class PresentedTool(CanonicalModel):
    """One tool exactly as a recorded session presented it to the agent's framework.

    The session's adapters build each framework's tool from these fields alone
    (docs/agents.md, "What a run stores of its tools"), so a frozen replay given only
    the run presents the same tools.

    Attributes:
        name: the tool's name (a variant's own name).
        description: its description (``""``: none).
        input_schema: its input JSON Schema, as declared.
        output_schema: its output JSON Schema, or ``None``.
        strict: whether the framework was asked for strict schemas (toolproof never
            does: pydantic-ai's ``strict`` left unset, the Agents SDK's
            ``strict_json_schema=False``).

    """

    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, JsonValue]
    output_schema: dict[str, JsonValue] | None = None
    strict: bool = False


class PresentedTools(CanonicalModel):
    """The tools a recorded session presented, in its order: ``runtime.json``'s ``presented``.

    Attributes:
        format: the record's version (:data:`PRESENTED_FORMAT`); another one is refused.
        tools: every exposed tool and variant, in the Toolset's order.

    """

    format: Literal[1] = PRESENTED_FORMAT
    tools: list[PresentedTool]


class ToolsetDescriptor(ContentModel):
    """The descriptor of a sealed Toolset: every tool's descriptor, sorted by name.

    Its ``id`` (``toolset_<hex>``) and :attr:`digest` are identical across processes
    and Python hash seeds for the same composition root. ``lock`` is the digest of the
    ``toolproof.lock`` the tools were checked against (absent without a lock), so a
    run names the lock it ran under; ``filters`` the include/exclude filters of the
    sources (absent when none), so changing a filter changes run ids; ``exposure`` the
    ``[serve] expose``/``hide`` globs and the names hidden from the outward faces
    (``{"expose", "hide", "hidden"}``; absent when nothing is hidden, see
    :mod:`toolproof.tools.exposure`); ``policy`` the ``[policy]`` Cedar policy set,
    whole (``{"default", "files": [{"name", "text"}], "digest"}``; absent without one,
    :mod:`toolproof.tools.policy`), so a run holds the policies that decided its calls.
    """

    ID_KIND = "toolset"

    tools: list[ToolDescriptor]
    lock: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")
    filters: list[dict[str, JsonValue]] = Field(default_factory=list)
    exposure: ExposureRecord | None = None
    policy: dict[str, JsonValue] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_lock(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a Toolset without a lock or filters keeps the descriptor (and run ids) it had
        data: dict[str, Any] = handler(self)
        if data.get("lock") is None:
            data.pop("lock", None)
        if not data.get("filters"):
            data.pop("filters", None)
        if data.get("exposure") is None:
            data.pop("exposure", None)
        if data.get("policy") is None:
            data.pop("policy", None)
        return data

    @property
    def digest(self) -> str:
        """The descriptor digest, ``sha256:<hex>`` (the hex of :attr:`id`)."""
        return digest_of_hex(self.id.split("_", 1)[1])
