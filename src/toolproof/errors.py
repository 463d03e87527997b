"""The error hierarchy of toolproof and its one mapping to exit codes, HTTP and MCP.

Hierarchy (split by fault)::

    Exception
    ├── UsageError                      misuse of the API (a programming error)
    │   └── ToolsetSealedError          add() after seal()
    └── ToolproofError                  operational root: bad input, failures, refusals
        ├── InputError                  exit 1 / HTTP 422
        │   ├── CanonicalizationError   a value that has no RFC 8785 form
        │   ├── IdentityMismatchError   stored content id != recomputed content id
        │   ├── ConfigError             toolproof.toml (file, key, rule)
        │   ├── ToolBindError           a tool that cannot be bound (tool, field, rule)
        │   ├── ExtensionError          an extension that cannot be registered or applied
        │   ├── ToolNameError           a bad or duplicate tool name
        │   └── RefError                a $ref that cannot be resolved when its step runs
        ├── ToolCallError               ToolResult.unwrap() on a failure (carries it)
        ├── BackendError                a relocation engine failed (worker, broker)
        │   └── ProtocolError           a message that breaks the relocation protocol
        ├── RecordingError              a run or session cannot be written (full disk)
        ├── AuthenticationError         a request without a valid bearer token (HTTP 401)
        ├── VerificationError           a run directory failed verification (exit 2)
        └── ReplayRefused               frozen replay refused (exit 2)

``UsageError`` sits outside the operational root on purpose: a broad
``except ToolproofError`` must never hide a programming mistake.

Every error carries structured fields (``tool``, ``field``, ``rule``, ``path``,
``digest``...) besides its message; :func:`error_mapping` is the single place
that turns an error into a CLI exit code, an HTTP status and an MCP error code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolproof.failures import FAILURE_TABLE
from toolproof.problems import (  # re-exported: the error formatters beside the errors
    FOREIGN_CODE_ERRORS,
    ValidationProblem,
    foreign_failure,
    validation_problem,
)

__all__ = [
    "FOREIGN_CODE_ERRORS",
    "AuthenticationError",
    "BackendError",
    "CanonicalizationError",
    "ConfigError",
    "ErrorMapping",
    "ExtensionError",
    "IdentityMismatchError",
    "InputError",
    "ProtocolError",
    "RecordingError",
    "RefError",
    "ReplayRefused",
    "ToolBindError",
    "ToolCallError",
    "ToolNameError",
    "ToolproofError",
    "ToolsetSealedError",
    "UsageError",
    "ValidationProblem",
    "VerificationError",
    "error_mapping",
    "foreign_failure",
    "mapping_for",
    "validation_problem",
]


class UsageError(Exception):
    """Misuse of the API: a programming error, never caught as an operational one."""


class ToolsetSealedError(UsageError):
    """A tool was added to a Toolset after ``seal()``.

    Attributes:
        tool: the name of the tool that came too late.

    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        super().__init__(
            f"toolset is sealed: cannot add tool {tool!r} after seal() "
            "(rule: tools are registered at the composition root, before sealing)"
        )


class ToolproofError(Exception):
    """Root of every operational toolproof error.

    Args:
        message: the message, naming the thing and the rule.
        **fields: structured context (``path``, ``step``, ``reasoner``...) for the
            adapters; a class with fixed fields has them as typed attributes too.

    Attributes:
        message: the message.
        fields: the structured fields the CLI (``--json``), HTTP problems and MCP error
            ``data.fields`` report.

    """

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = fields


class InputError(ToolproofError):
    """Bad input from a user: a value, a file, a declaration. CLI exit code 1."""


class CanonicalizationError(InputError):
    """A value has no RFC 8785 canonical JSON form.

    Attributes:
        path: JSON-path-like location of the bad item (``$.a[2]``).
        rule: the rule it broke.

    """

    def __init__(self, path: str, rule: str) -> None:
        self.path = path
        self.rule = rule
        super().__init__(f"cannot canonicalize value at {path}: {rule}", path=path, rule=rule)


class IdentityMismatchError(InputError):
    """A model's stored content id differs from the id recomputed from its content.

    Attributes:
        kind: the id kind (``toolspec``, ``call``...).
        stored: the id found in the input.
        computed: the id recomputed from the content.

    """

    def __init__(self, kind: str, stored: str, computed: str) -> None:
        self.kind = kind
        self.stored = stored
        self.computed = computed
        super().__init__(
            f"{kind} id mismatch: stored id {stored} but content hashes to {computed} "
            "(rule: a content id is the digest of the canonical JSON of the content)",
            kind=kind,
            stored=stored,
            computed=computed,
        )


class ConfigError(InputError):
    """A composition-root file (``toolproof.toml``) or spec is invalid.

    Attributes:
        file: the file that holds the error.
        key: the dotted key that is wrong (``python[0].module``).
        rule: the rule it broke.

    """

    def __init__(self, file: str, key: str, rule: str) -> None:
        self.file = file
        self.key = key
        self.rule = rule
        super().__init__(f"{file}: {key}: {rule}", file=file, key=key, rule=rule)


class ToolBindError(InputError):
    """A tool declaration or function cannot be bound faithfully.

    Attributes:
        tool: the tool's name.
        field: the offending field or schema location (``input_schema.properties.x``).
        rule: the rule it broke.

    """

    def __init__(self, tool: str, field: str, rule: str) -> None:
        self.tool = tool
        self.field = field
        self.rule = rule
        super().__init__(
            f"cannot bind tool {tool!r}: {field}: {rule}", tool=tool, field=field, rule=rule
        )


class ExtensionError(InputError):
    """An extension cannot be registered, or a combo cannot be applied to a tool.

    Attributes:
        rule: the rule that was broken.
        tool: the tool the combo was applied to (when applying).
        combo: the combo's extension names, in order (when applying).
        extension: the extension's name (when registering).

    Args:
        rule: the rule that was broken; also the message unless ``message`` is given.
        message: a message that says more than the rule (which tool, which combo).
        tool: see Attributes.
        combo: see Attributes.
        extension: see Attributes.

    """

    def __init__(
        self,
        rule: str,
        *,
        message: str | None = None,
        tool: str | None = None,
        combo: Sequence[str] | None = None,
        extension: str | None = None,
    ) -> None:
        self.rule = rule
        self.tool = tool
        self.combo = tuple(combo) if combo is not None else None
        self.extension = extension
        fields: dict[str, Any] = {"rule": rule}
        if tool is not None:
            fields["tool"] = tool
        if combo is not None:
            fields["combo"] = list(combo)
        if extension is not None:
            fields["extension"] = extension
        super().__init__(message or rule, **fields)


class ToolNameError(InputError):
    """A tool name is malformed or already taken.

    Attributes:
        tool: the offending name.
        rule: the rule it broke.

    """

    def __init__(self, tool: str, rule: str) -> None:
        self.tool = tool
        self.rule = rule
        super().__init__(f"tool name {tool!r}: {rule}", tool=tool, rule=rule)


class RefError(InputError):
    """A reference cannot be resolved when its step runs (the message says which and why).

    Attributes:
        ref: the reference (``$ref`` value) that did not resolve.

    """

    def __init__(self, message: str, *, ref: str) -> None:
        self.ref = ref
        super().__init__(message, ref=ref)


class ToolCallError(ToolproofError):
    """Raised by ``ToolResult.unwrap()`` when the call failed.

    Attributes:
        failure: the :class:`toolproof.ToolFailure` of the call.

    """

    def __init__(self, failure: Any) -> None:
        # Any: ToolFailure is a contract model, a floor above this module
        self.failure: Any = failure
        super().__init__(f"{failure.kind}: {failure.message}", failure=failure)


class BackendError(ToolproofError):
    """An execution backend (worker pool, broker) failed outside the tool body."""


class ProtocolError(BackendError):
    """A message that does not follow the relocation protocol.

    Attributes:
        rule: the rule the message broke.

    """

    def __init__(self, rule: str) -> None:
        self.rule = rule
        super().__init__(f"relocation protocol: {rule}", rule=rule)


class RecordingError(ToolproofError):
    """A run directory or a recorded session cannot be written (full disk, read-only).

    Nothing half-written is left under ``runs/``. CLI exit code 1, HTTP 507.

    Attributes:
        path: where the write failed.

    """

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(message, path=path)


class AuthenticationError(ToolproofError):
    """An HTTP request without a valid bearer token (missing, wrong, or not accepted there).

    HTTP 401 with ``WWW-Authenticate: Bearer``; CLI exit code 1.
    """


def _given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not ``None``): what ``.fields`` reports."""
    return {key: value for key, value in fields.items() if value is not None}


class VerificationError(ToolproofError):
    """A run directory failed verification. CLI exit code 2.

    Attributes:
        path: the file or directory that failed, when one does.
        file: the run file (``trace.jsonl``...) that failed, when named relative.
        check: the check that failed.
        event: the trace event (its index) that failed.
        span: the OpenTelemetry span id that failed (``otel-check``).
        field: the span attribute or field that differs.

    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        file: str | None = None,
        check: str | None = None,
        event: int | None = None,
        span: str | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.file = file
        self.check = check
        self.event = event
        self.span = span
        self.field = field
        fields = _given(path=path, file=file, check=check, event=event, span=span, field=field)
        super().__init__(message, **fields)


class ReplayRefused(ToolproofError):
    """Frozen replay refused to proceed; no live call was made. CLI exit code 2.

    Attributes:
        rule: what differed (``call``, ``model turn``, ``arguments``, ``read``...).
        check: the check that refused (``verify``: the run does not verify).
        file: the run file that refused.
        step: the plan step that would have run live.
        call: the id of the unrecorded call.
        event: the index of the recorded event that differs.
        changed: the tools whose descriptors changed (``rule="runtime descriptor"``).

    """

    def __init__(
        self,
        message: str,
        *,
        rule: str | None = None,
        check: str | None = None,
        file: str | None = None,
        step: str | None = None,
        call: str | None = None,
        event: int | None = None,
        changed: Sequence[str] | None = None,
    ) -> None:
        self.rule = rule
        self.check = check
        self.file = file
        self.step = step
        self.call = call
        self.event = event
        self.changed = list(changed) if changed is not None else None
        fields = _given(rule=rule, check=check, file=file, step=step, call=call, event=event)
        super().__init__(message, **fields, **_given(changed=self.changed))


@dataclass(frozen=True)
class ErrorMapping:
    """How one error class is reported by each adapter.

    Attributes:
        code: the stable error code of the class (``config``, ``replay-refused``): the
            ``error`` of an HTTP problem and the ``data.error`` of an MCP error.
        exit_code: CLI exit code (0 ok, 1 usage/input error, 2 verification/replay).
        http_status: HTTP status code for the HTTP API.
        mcp_code: JSON-RPC error code for MCP (-32602 invalid params, -32603 internal).

    """

    code: str
    exit_code: int
    http_status: int
    mcp_code: int


_INPUT = (1, 422, -32602)
_INTERNAL = (1, 500, -32603)
_REFUSED = (2, 409, -32603)

ERROR_TABLE: dict[type[BaseException], ErrorMapping] = {
    cls: ErrorMapping(code, *outcome)
    for cls, code, outcome in (
        (UsageError, "usage", _INTERNAL),
        (ToolsetSealedError, "toolset-sealed", _INTERNAL),
        (ToolproofError, "toolproof", _INTERNAL),
        (InputError, "input", _INPUT),
        (CanonicalizationError, "canonicalization", _INPUT),
        (IdentityMismatchError, "identity-mismatch", _INPUT),
        (ConfigError, "config", _INPUT),
        (ToolBindError, "tool-bind", _INPUT),
        (ExtensionError, "extension", _INPUT),
        (ToolNameError, "tool-name", _INPUT),
        (RefError, "ref", _INPUT),
        (ToolCallError, "tool-call", (1, 502, -32603)),
        (BackendError, "backend", (1, 503, -32603)),
        (ProtocolError, "protocol", (1, 503, -32603)),
        (RecordingError, "recording", (1, 507, -32603)),
        (AuthenticationError, "unauthorized", (1, 401, -32600)),
        (VerificationError, "verification", _REFUSED),
        (ReplayRefused, "replay-refused", _REFUSED),
    )
}
"""Every error class of the hierarchy and how it is reported: the one table CLI, HTTP and
MCP read (a test checks every class is in it and the codes are unique)."""

UNKNOWN_ERROR = ErrorMapping("internal", *_INTERNAL)
"""The mapping of an exception that is not a toolproof error."""


def error_mapping(error: BaseException) -> ErrorMapping:
    """Map an error to its CLI exit code, HTTP status and MCP error code.

    Args:
        error: any exception; the most specific class in the table wins.

    Returns:
        The :class:`ErrorMapping` of the error's class (see :func:`mapping_for`); for a
        :class:`ToolCallError`, the HTTP status and MCP code of its failure's kind
        (:data:`toolproof.failures.FAILURE_TABLE`: ``invalid_arguments`` is 422 and
        -32602, ``timeout`` 504...), its code and exit code those of the class.

    """
    mapping = mapping_for(type(error))
    if isinstance(error, ToolCallError):
        kind = FAILURE_TABLE.get(error.failure.kind)
        if kind is not None:
            return replace(mapping, http_status=kind.http_status, mcp_code=kind.mcp_code)
    return mapping


def mapping_for(cls: type[BaseException]) -> ErrorMapping:
    """The :class:`ErrorMapping` of an error class: its nearest class in the table, by MRO.

    Args:
        cls: an exception class.

    Returns:
        The mapping of the first class of ``cls.__mro__`` in :data:`ERROR_TABLE` (the most
        specific wins, as in starlette's exception handlers); :data:`UNKNOWN_ERROR`
        (exit 1, HTTP 500, -32603) for any other exception.

    """
    for base in cls.__mro__:
        mapping = ERROR_TABLE.get(base)
        if mapping is not None:
            return mapping
    return UNKNOWN_ERROR
