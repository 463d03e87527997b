"""The ``toolproof.toml`` schema: closed pydantic models, and errors that name the key.

:func:`load_config` reads the file with :mod:`tomllib` and validates it against
:class:`ToolproofConfig`; unknown keys are refused, a misspelt one with a
``did you mean`` hint, and every error is a :class:`~toolproof.errors.ConfigError`
naming the file, the key and the rule. The format is described in
:mod:`toolproof.config`.
"""

from __future__ import annotations

import difflib
import tomllib
import typing
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from toolproof.config.mcp_auth import McpAuthTable, resolve_auth
from toolproof.contract.bounds import (
    DEFAULT_SEGMENT_CALLS,
    MAX_COUNT,
    STDIO_MESSAGE_BYTES,
    MessageBytes,
    Seconds,
)
from toolproof.contract.names import TOOL_NAME_PATTERN
from toolproof.errors import ConfigError
from toolproof.extensions.approvals.policy import ApprovalPolicy
from toolproof.tools.lint import RULE_IDS, Allow, FailOn
from toolproof.tools.lock import LOCK_FILE, OnDrift

if TYPE_CHECKING:  # the MCP SDK is imported only when a [[mcp]] entry is loaded
    from toolproof.sources.mcp.oauth import Authorizer, McpAuth
    from toolproof.sources.mcp.source import McpServer

__all__ = [
    "ExtensionsSection",
    "GroundingSection",
    "LintAllow",
    "LintSection",
    "LockSection",
    "McpSource",
    "PythonSource",
    "RetrievalSource",
    "ServeSection",
    "TelemetrySection",
    "ToolSection",
    "ToolproofConfig",
    "ValidationSection",
    "load_config",
]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PythonSource(_Closed):
    """A ``[[python]]`` entry: a module whose ``@toolproof.tool`` functions become tools.

    ``include``/``exclude`` are globs over the tool names (see
    :mod:`toolproof.tools.filters`).

    ``import_timeout`` (seconds) bounds the module's import: it runs in a thread of its
    own, so a module that blocks at import never freezes the caller's event loop, and
    one still importing after that long is a :class:`ConfigError`.
    """

    module: str = Field(min_length=1)
    functions: list[str] | None = None
    path: str | None = None
    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    import_timeout: Seconds = 60.0


class McpSource(_Closed):
    """A ``[[mcp]]`` entry: an MCP server whose tools become ToolContributions.

    Exactly one of ``command`` (stdio: with ``args``, ``env``, ``cwd``) and ``url``
    (streamable HTTP: with ``headers``) is given. Tool names become
    ``<prefix>_<tool>``; ``prefix`` defaults to ``name`` and ``prefix = ""`` keeps
    the server's names. ``startup_timeout`` and ``call_timeout`` are seconds;
    ``max_message_bytes`` bounds one JSON-RPC message the stdio server writes.
    ``include``/``exclude`` are globs over the server's tool names (see
    :mod:`toolproof.tools.filters`). ``protocol``: ``auto`` negotiates 2026-07-28 and
    falls back to the ``initialize`` handshake; ``2025-11-25`` sends only the handshake.
    See ``docs/mcp.md``.
    """

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    prefix: str | None = None
    startup_timeout: Seconds = 30.0
    call_timeout: Seconds = 60.0
    max_message_bytes: MessageBytes = STDIO_MESSAGE_BYTES
    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    protocol: Literal["auto", "2025-11-25"] = "auto"
    auth: McpAuthTable | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of 'command' (stdio) and 'url' (streamable HTTP)")
        if self.auth is not None and "authorization" in {k.lower() for k in self.headers}:
            raise ValueError(
                "'headers' Authorization and [mcp.auth] conflict (the auth table sets the "
                "Authorization header: give one of them)"
            )
        if self.url is not None:
            keys = ("args", "env", "cwd", "max_message_bytes")
            stdio_only = [k for k in keys if k in self.model_fields_set]
            if stdio_only:
                raise ValueError(
                    f"{stdio_only[0]!r} applies to stdio servers ('command'), not 'url'"
                )
        else:
            for key in ("headers", "auth"):
                if key in self.model_fields_set:
                    raise ValueError(
                        f"{key!r} applies to streamable-HTTP servers ('url'), not 'command'"
                    )
        return self

    def server(self, base: Path, authorizer: Authorizer | None = None) -> McpServer:
        """The resolved :class:`McpServer` of this entry.

        ``cwd`` (default: ``base``) and a relative ``command`` path containing ``/``
        are taken relative to ``base``, the folder of the toml file; a bare command
        name is looked up on ``PATH``.
        """
        from toolproof.sources.mcp.source import McpServer

        command = self.command
        if command is not None and "/" in command and not Path(command).is_absolute():
            command = str((base / command).resolve())
        cwd = str((base / self.cwd).resolve()) if self.cwd is not None else str(base.resolve())
        return McpServer(
            name=self.name,
            command=command,
            args=tuple(self.args),
            env=dict(self.env),
            cwd=cwd if command is not None else None,
            url=self.url,
            headers=dict(self.headers),
            prefix=self.prefix,
            startup_timeout=self.startup_timeout,
            call_timeout=self.call_timeout,
            max_message_bytes=self.max_message_bytes,
            include=tuple(self.include) if self.include is not None else None,
            exclude=tuple(self.exclude),
            protocol=self.protocol,
            auth=self._auth(base, authorizer),
        )

    def _auth(self, base: Path, authorizer: Authorizer | None) -> McpAuth | None:
        if self.auth is None or self.url is None:
            return None
        return resolve_auth(self.auth, self.name, self.url, base, authorizer)


class RetrievalSource(_Closed):
    """A ``[[retrieval]]`` entry: a pinned corpus served by a ``retrieve`` tool.

    ``corpus`` is a folder (relative to the toml file) of .txt/.md/.rst/.html files;
    the tool (named ``name``) searches an SQLite FTS5 index ranked by BM25. ``cache``
    is where index files are kept (default ``$TOOLPROOF_CACHE`` or
    ``~/.cache/toolproof``); ``max_chunk_bytes`` is the chunk size limit in bytes.
    ``retriever`` names another retriever, installed in the ``toolproof.retrieval``
    entry-point group: a factory ``(corpus, options) -> Retriever`` called with
    the pinned corpus and this entry as JSON. Its old name ``backend`` (which now
    names only a relocation backend) is read with a :class:`FutureWarning` naming the
    new key (:func:`load_config`).
    """

    name: str = Field(default="retrieve", pattern=TOOL_NAME_PATTERN)
    corpus: str = Field(min_length=1)
    max_chunk_bytes: int = Field(default=1500, ge=64, le=1_048_576)
    tokenizer: str = "porter unicode61 remove_diacritics 2"
    cache: str | None = None
    retriever: str = "fts5-bm25"


class ExtensionsSection(_Closed):
    """``[extensions]``: modules that register extensions (besides the entry points)."""

    modules: list[str] = Field(default_factory=list)


class ToolSection(_Closed):
    """``[tools.NAME]``: per-tool settings.

    ``extensions`` is one combo or a list of combos; ``idempotency = "key"`` declares
    that the bound tool NAME (a declared or MCP tool, typically) honours the call's
    idempotency key (``ToolSpec.idempotency``; docs/durability.md).
    """

    extensions: Any = None
    idempotency: Literal["key"] | None = None


class LockSection(_Closed):
    """``[lock]``: how loading treats tools that differ from ``toolproof.lock``.

    ``on_drift``: ``quarantine`` (default), ``refuse`` or ``warn`` (see
    :class:`toolproof.tools.lock.OnDrift`); ``file``: the lock, relative to the toml
    file (default ``toolproof.lock`` beside it). Without a lock file nothing is checked.
    """

    on_drift: OnDrift = OnDrift.QUARANTINE
    file: str = LOCK_FILE


class LintAllow(_Closed):
    """A ``[[lint.allow]]`` entry: ``tool`` (a glob over tool names) and ``rule`` (a rule id).

    ``reason`` says why, for the next reviewer. See :class:`toolproof.tools.lint.Allow`.
    """

    tool: str = Field(min_length=1)
    rule: str
    reason: str = ""

    @field_validator("rule")
    @classmethod
    def _known_rule(cls, value: str) -> str:
        if value not in RULE_IDS:
            close = difflib.get_close_matches(value, RULE_IDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{value!r} is not a lint rule ({', '.join(RULE_IDS)}){hint}")
        return value

    def allow(self) -> Allow:
        """The entry as the lint applies it."""
        return Allow(self.tool, self.rule)


class LintSection(_Closed):
    """``[lint]``: the tool-description lint at load (docs/lint.md).

    ``fail_on``: the least severity that quarantines a tool, ``high`` (default),
    ``medium``, ``low`` or ``never`` (see :class:`toolproof.tools.lint.FailOn`);
    ``allow``: ``[[lint.allow]]`` entries whose findings never quarantine.
    """

    fail_on: FailOn = FailOn.HIGH
    allow: list[LintAllow] = Field(default_factory=list)


class ServeSection(_Closed):
    """``[serve]``: which tools the outward faces (MCP, sessions, run specs) expose.

    ``expose``: tool-name globs shown although a variant of their base is gated by
    ``approve`` (hidden otherwise); ``hide``: tool-name globs never shown (wins over
    ``expose``). Each glob must match a tool of the file (see
    :mod:`toolproof.tools.exposure`). ``max_message_bytes``: the longest JSON-RPC
    message ``toolproof serve`` reads from a stdio client (one line, bytes).
    ``segment_calls``: ``serve --record`` seals the session into a run every this many
    steps (``0``: one run, at the end; docs/runs.md "Segments"). ``tasks``: tool-name
    globs of the tools ``toolproof serve`` runs as MCP tasks for a client that takes
    them (``[]``: none; absent: the tools on the ``process`` or ``celery`` backend;
    docs/serve.md "Tasks").
    """

    expose: list[str] = Field(default_factory=list)
    hide: list[str] = Field(default_factory=list)
    max_message_bytes: MessageBytes = STDIO_MESSAGE_BYTES
    segment_calls: int = Field(default=DEFAULT_SEGMENT_CALLS, ge=0, le=MAX_COUNT, strict=True)
    tasks: list[str] | None = None

    @field_validator("expose", "hide", "tasks")
    @classmethod
    def _globs(cls, value: list[str] | None) -> list[str] | None:
        for glob in value or ():
            if not glob.strip():
                raise ValueError("an empty glob matches no tool name")
        return value


class TelemetrySection(_Closed):
    """``[telemetry]``: OpenTelemetry for the commands that load this file.

    ``enabled``: call :func:`toolproof.instrument` (needs ``toolproof[otel]``; spans go
    to the exporter the ``OTEL_EXPORTER_OTLP_*`` environment names, OTLP/HTTP);
    ``capture_content``: record arguments and results as span attributes;
    ``redact``: JSON Pointers into the arguments redacted first (the ``audit`` rule).
    """

    enabled: bool = False
    capture_content: bool = False
    redact: tuple[str, ...] = ()

    @field_validator("redact")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pointer in value:
            if not pointer.startswith("/"):
                raise ValueError(f"{pointer!r} is not a JSON Pointer (RFC 6901: starts with '/')")
        return value


class ValidationSection(_Closed):
    """``[validation]``: how validating one call of a schema that needs isolation is bounded.

    Such a schema (an embedded ``$id``, an anchor, a dynamic reference, or more than 64
    subschemas per value: :func:`toolproof.schema.limits.needs_isolation`) validates
    in a worker process; ``seconds`` is the deadline of one call, ``memory_mib`` the
    worker's address-space cap in MiB, ``workers`` the worker processes. Past a bound
    the call is ``invalid_arguments`` naming it (:mod:`toolproof.schema.isolation`).
    Applied process-wide when the file is loaded.
    """

    seconds: float = Field(default=5.0, gt=0, le=3600)
    memory_mib: int = Field(default=1024, ge=64, le=1 << 20)
    workers: int = Field(default=2, ge=1, le=64)


class GroundingSection(_Closed):
    """``[grounding]``: how far an agent's answer is checked against what it cites.

    ``level``: ``details`` (the default: each quote must occur in the result it cites,
    a quote of fewer than ``min_quote_words`` words supports nothing on its own, and
    every number with its unit, date, percentage and money amount of a sentence that
    carries a citation must occur in a result it cites) or ``quote`` (the quotes
    only). docs/grounding.md; :mod:`toolproof.evidence.grounding`.
    """

    level: Literal["quote", "details"] = "details"
    min_quote_words: int = Field(default=3, ge=1, le=100)


class PolicySection(_Closed):
    """``[policy]``: Cedar policies over every call (docs/policy.md).

    ``files``: globs (relative to the ``toolproof.toml``) of the Cedar policy files, each
    matching at least one file; ``default``: what a call no policy decides gets.
    :mod:`toolproof.tools.policy`.
    """

    files: list[str] = Field(min_length=1)
    default: Literal["deny", "allow"] = "deny"


class ToolproofConfig(_Closed):
    """The parsed ``toolproof.toml``."""

    python: list[PythonSource] = Field(default_factory=list)
    mcp: list[McpSource] = Field(default_factory=list)
    retrieval: list[RetrievalSource] = Field(default_factory=list)
    extensions: ExtensionsSection = Field(default_factory=ExtensionsSection)
    tools: dict[str, ToolSection] = Field(default_factory=dict)
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)
    lock: LockSection = Field(default_factory=LockSection)
    lint: LintSection = Field(default_factory=LintSection)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)
    serve: ServeSection = Field(default_factory=ServeSection)
    approvals: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    validation: ValidationSection | None = None
    grounding: GroundingSection = Field(default_factory=GroundingSection)
    policy: PolicySection | None = None


def _key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


def _rule(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key (not part of the toolproof.toml format)" + _did_you_mean(error)
    if error["type"] == "missing":
        return "required key is missing"
    if error["type"] == "model_type":  # pydantic names the class: the toml names the table
        table = ".".join(str(part) for part in error["loc"] if not isinstance(part, int))
        return f"must be a table ([{table}])"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _did_you_mean(error: Any) -> str:
    """``; did you mean 'module'?`` for a misspelt key, from the model's field names."""
    loc = tuple(error["loc"])
    model: Any = ToolproofConfig
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        if field is None:
            continue  # a key of a table of tables (tools.<name>)
        annotation = field.annotation
        inner = [a for a in typing.get_args(annotation) if isinstance(a, type)] or [annotation]
        model = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
    if model is None or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _renamed_keys(file: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with each ``[[retrieval]] backend`` read as ``retriever`` (warned once each).

    Raises:
        ConfigError: an entry gives both keys.

    """
    entries = raw.get("retrieval")
    if not isinstance(entries, list):
        return raw
    renamed: list[Any] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and "backend" in entry:
            key = f"retrieval[{index}].backend"
            if "retriever" in entry:
                rule = "'backend' is the old name of 'retriever': give only 'retriever'"
                raise ConfigError(str(file), key, rule)
            warnings.warn(
                f"{file}: {key} is deprecated: write retriever = {entry['backend']!r} "
                "('backend' names only a relocation backend now)",
                FutureWarning,
                stacklevel=3,
            )
            entry = {("retriever" if k == "backend" else k): v for k, v in entry.items()}
        renamed.append(entry)
    return {**raw, "retrieval": renamed}


def load_config(path: str | Path) -> tuple[ToolproofConfig, dict[str, Any]]:
    """Read and validate a ``toolproof.toml``.

    Returns:
        The parsed config and the raw TOML table (for sections later layers normalize).

    Raises:
        ConfigError: the file is missing or a folder, not TOML, or breaks the format.

    """
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(str(file), "(file)", "file not found") from None
    except IsADirectoryError:
        raise ConfigError(
            str(file), "(file)", "is a folder; give the toolproof.toml file in it"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(file), "(file)", f"cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(file), "(file)", f"not valid TOML: {exc}") from exc
    try:
        base = {"base": file.parent}  # a relative path in the file is relative to it
        return ToolproofConfig.model_validate(_renamed_keys(file, raw), context=base), raw
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # An unknown key explains a "missing" one next to it (a typo): report it first.
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise ConfigError(str(file), _key(tuple(first["loc"])), _rule(first)) from None
