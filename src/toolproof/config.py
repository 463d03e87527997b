"""The composition root: ``toolproof.toml`` -> a sealed :class:`Toolset`.

The file (TOML, read with :mod:`tomllib`) has these tables; unknown keys are refused
and relative paths are relative to the file::

    [[python]]                  # tools from functions marked @toolproof.tool
    module = "mypkg.tools"
    functions = ["add"]         # optional: only these (marked or not)
    path = "."                  # optional: directory put on sys.path (default: the file's)
    import_timeout = 60         # optional: seconds the import may take

    [[mcp]]                     # tools from an MCP server (stdio or streamable HTTP)
    name = "git"
    command = "mcp-server-git"
    args = ["--repository", "."]

    [extensions]
    modules = ["mypkg.exts"]

    [tools.add]
    extensions = [["retry", {name = "timeout", config = {seconds = 2}}], ["process"]]

    [backends.celery]
    broker = "redis://127.0.0.1:6379/0"

    [serve]                     # what the outward faces expose (see docs/approvals.md)
    expose = ["add_cache"]      # tool-name globs shown although a sibling is gated
    hide = ["debug_*"]          # tool-name globs never shown

    [approvals]                 # the policy of the approve wrapper (docs/approvals.md)
    store = "approvals.sqlite"
    timeout_seconds = 600
    mode = "wait"               # | "defer"

    [lock]                      # toolproof.lock beside the file (see docs/lock.md)
    on_drift = "quarantine"     # | "refuse" | "warn"
    file = "toolproof.lock"     # optional: another lock file

Every error is a :class:`toolproof.errors.ConfigError` naming the file, the key and
the rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import importlib
import sys
import threading
import tomllib
import typing
from collections.abc import Generator
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from toolproof.backends import register_backends
from toolproof.contract.bounds import Seconds
from toolproof.contract.names import TOOL_NAME_PATTERN
from toolproof.errors import (
    FOREIGN_CODE_ERRORS,
    ConfigError,
    InputError,
    ToolBindError,
    ToolNameError,
    foreign_failure,
)
from toolproof.evidence.chunking import ChunkConfig
from toolproof.evidence.corpus import load_corpus
from toolproof.extensions.approvals.policy import ApprovalPolicy
from toolproof.extensions.approvals.request import Approver
from toolproof.extensions.config import configure_extensions
from toolproof.extensions.registry import ExtensionRegistry
from toolproof.tools.exposure import Exposure
from toolproof.tools.filters import ToolFilter
from toolproof.tools.function import TOOL_MARK, ToolOptions
from toolproof.tools.lock import LOCK_FILE, OnDrift, check_toolset_lock
from toolproof.tools.python_catalog import bind_python_catalog
from toolproof.tools.resources import CONFIG_PATH, FILTERS, RAW_CONFIG, ResourceKey
from toolproof.tools.retrieval import IndexConfig, RetrievalRuntime
from toolproof.tools.retrieval_seam import RetrievalBackend, RetrievalRegistry
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

if TYPE_CHECKING:  # the MCP SDK is imported only when a [[mcp]] entry is loaded
    from toolproof.tools.mcp import McpServer

__all__ = [
    "CONFIG",
    "EXTENSIONS",
    "ExtensionsSection",
    "LockSection",
    "McpSource",
    "PythonSource",
    "RetrievalSource",
    "ServeSection",
    "ToolSection",
    "ToolproofConfig",
    "ToolsetLoader",
    "load_config",
    "load_toolset",
    "lock_path_of",
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
    the server's names. ``startup_timeout`` and ``call_timeout`` are seconds.
    ``include``/``exclude`` are globs over the server's tool names (see
    :mod:`toolproof.tools.filters`). See ``docs/mcp.md``.
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
    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of 'command' (stdio) and 'url' (streamable HTTP)")
        if self.url is not None:
            stdio_only = [k for k in ("args", "env", "cwd") if k in self.model_fields_set]
            if stdio_only:
                raise ValueError(
                    f"{stdio_only[0]!r} applies to stdio servers ('command'), not 'url'"
                )
        elif "headers" in self.model_fields_set:
            raise ValueError("'headers' applies to streamable-HTTP servers ('url'), not 'command'")
        return self

    def server(self, base: Path) -> McpServer:
        """The resolved :class:`McpServer` of this entry.

        ``cwd`` (default: ``base``) and a relative ``command`` path containing ``/``
        are taken relative to ``base``, the folder of the toml file; a bare command
        name is looked up on ``PATH``.
        """
        from toolproof.tools.mcp import McpServer

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
            include=tuple(self.include) if self.include is not None else None,
            exclude=tuple(self.exclude),
        )


class RetrievalSource(_Closed):
    """A ``[[retrieval]]`` entry: a pinned corpus served by a ``retrieve`` tool.

    ``corpus`` is a folder (relative to the toml file) of .txt/.md/.rst/.html files;
    the tool (named ``name``) searches an SQLite FTS5 index ranked by BM25. ``cache``
    is where index files are kept (default ``$TOOLPROOF_CACHE`` or
    ``~/.cache/toolproof``); ``max_chunk_bytes`` is the chunk size limit in bytes.
    ``backend`` names another retrieval runtime, installed in the ``toolproof.retrieval``
    entry-point group: a factory ``(corpus, options) -> RetrievalBackend`` called with
    the pinned corpus and this entry as JSON.
    """

    name: str = Field(default="retrieve", pattern=TOOL_NAME_PATTERN)
    corpus: str = Field(min_length=1)
    max_chunk_bytes: int = Field(default=1500, ge=64, le=1_048_576)
    tokenizer: str = "porter unicode61 remove_diacritics 2"
    cache: str | None = None
    backend: str = "fts5-bm25"


class ExtensionsSection(_Closed):
    """``[extensions]``: modules that register extensions (besides the entry points)."""

    modules: list[str] = Field(default_factory=list)


class ToolSection(_Closed):
    """``[tools.NAME]``: per-tool settings; ``extensions`` is one combo or a list of combos."""

    extensions: Any = None


class LockSection(_Closed):
    """``[lock]``: how loading treats tools that differ from ``toolproof.lock``.

    ``on_drift``: ``quarantine`` (default), ``refuse`` or ``warn`` (see
    :class:`toolproof.tools.lock.OnDrift`); ``file``: the lock, relative to the toml
    file (default ``toolproof.lock`` beside it). Without a lock file nothing is checked.
    """

    on_drift: OnDrift = OnDrift.QUARANTINE
    file: str = LOCK_FILE


class ServeSection(_Closed):
    """``[serve]``: which tools the outward faces (MCP, sessions, run specs) expose.

    ``expose``: tool-name globs shown although a variant of their base is gated by
    ``approve`` (hidden otherwise); ``hide``: tool-name globs never shown (wins over
    ``expose``). Each glob must match a tool of the file (see
    :mod:`toolproof.tools.exposure`).
    """

    expose: list[str] = Field(default_factory=list)
    hide: list[str] = Field(default_factory=list)

    @field_validator("expose", "hide")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for glob in value:
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


class ToolproofConfig(_Closed):
    """The parsed ``toolproof.toml``."""

    python: list[PythonSource] = Field(default_factory=list)
    mcp: list[McpSource] = Field(default_factory=list)
    retrieval: list[RetrievalSource] = Field(default_factory=list)
    extensions: ExtensionsSection = Field(default_factory=ExtensionsSection)
    tools: dict[str, ToolSection] = Field(default_factory=dict)
    backends: dict[str, dict[str, Any]] = Field(default_factory=dict)
    lock: LockSection = Field(default_factory=LockSection)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)
    serve: ServeSection = Field(default_factory=ServeSection)
    approvals: ApprovalPolicy = Field(default_factory=ApprovalPolicy)


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


CONFIG = ResourceKey[ToolproofConfig]("config.parsed")
"""The validated ``toolproof.toml`` a Toolset was built from (``toolset.resources[CONFIG]``)."""

EXTENSIONS = ResourceKey[ExtensionRegistry]("config.extensions")
"""The extension registry a Toolset's combos were bound from (built-ins, backends,
``[extensions] modules`` and entry points)."""


def load_config(path: str | Path) -> tuple[ToolproofConfig, dict[str, Any]]:
    """Read and validate a ``toolproof.toml``.

    Returns:
        The parsed config and the raw TOML table (for sections later layers normalize).

    Raises:
        ConfigError: the file is missing, not TOML, or breaks the format.

    """
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(str(file), "(file)", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(file), "(file)", f"cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(file), "(file)", f"not valid TOML: {exc}") from exc
    try:
        return ToolproofConfig.model_validate(raw), raw
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # An unknown key explains a "missing" one next to it (a typo): report it first.
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise ConfigError(str(file), _key(tuple(first["loc"])), _rule(first)) from None


def _import(module: str, file: Path, key: str, search_path: Path) -> ModuleType:
    entry = str(search_path)
    if entry not in sys.path:
        sys.path.insert(0, entry)
    try:
        return importlib.import_module(module)
    except FOREIGN_CODE_ERRORS as exc:
        raise ConfigError(
            str(file), key, f"cannot import module {module!r}: {foreign_failure(exc)}"
        ) from exc


async def import_python_source(source: PythonSource, file: Path, index: int) -> ModuleType:
    """Import the module of one ``[[python]]`` entry off the event loop, within its timeout.

    The import runs in a daemon thread: a module that blocks at import (a sleep, a
    socket) leaves the caller's event loop free (a server keeps answering) and, past
    ``import_timeout`` seconds, is reported; its thread is abandoned (it cannot be
    stopped) and ends with the process.

    Raises:
        ConfigError: the import failed (naming the module and the exception) or did not
            finish within ``import_timeout`` seconds.

    """
    base = file.parent
    search = (base / source.path).resolve() if source.path is not None else base.resolve()
    key = f"python[{index}].module"
    loop = asyncio.get_running_loop()
    done: asyncio.Future[ModuleType] = loop.create_future()

    def settle(module: ModuleType | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(typing.cast(ModuleType, module))

    def work() -> None:
        module: ModuleType | None = None
        error: BaseException | None = None
        try:
            module = _import(source.module, file, key, search)
        except BaseException as exc:  # handed to the loop; the thread ends here
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(settle, module, error)

    threading.Thread(target=work, name=f"toolproof-import-{source.module}", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), source.import_timeout)
    except TimeoutError:
        raise ConfigError(
            str(file),
            key,
            f"importing module {source.module!r} did not finish within "
            f"{source.import_timeout:g} s (import_timeout); it blocks at import",
        ) from None


def _marked_functions(module: ModuleType) -> Generator[tuple[str, Any], None, None]:
    for attr, value in vars(module).items():
        if (
            callable(value)
            and getattr(value, TOOL_MARK, None) is not None
            and getattr(value, "__module__", None) == module.__name__
        ):
            yield attr, value


def bind_python_source(toolset: Toolset, source: PythonSource, file: Path, index: int) -> None:
    """Add the tools of one ``[[python]]`` entry to ``toolset``.

    A function that cannot be bound is quarantined with its reason; a missing
    module or listed function is a :class:`ConfigError`.
    """
    base = file.parent
    search = (base / source.path).resolve() if source.path is not None else base.resolve()
    module = _import(source.module, file, f"python[{index}].module", search)
    if source.functions is None:
        chosen = list(_marked_functions(module))
    else:
        chosen = []
        for position, fname in enumerate(source.functions):
            fn = getattr(module, fname, None)
            if fn is None or not callable(fn):
                raise ConfigError(
                    str(file),
                    f"python[{index}].functions[{position}]",
                    f"module {source.module!r} has no function {fname!r}",
                )
            chosen.append((fname, fn))
    owner = f"python:{source.module}"
    bind_python_catalog(toolset.catalog, module, owner)
    named = [
        ((getattr(fn, TOOL_MARK, None) or ToolOptions()).name or attr, attr, fn)
        for attr, fn in chosen
    ]
    chooser = ToolFilter(
        owner, tuple(source.include) if source.include is not None else None, tuple(source.exclude)
    )
    kept = set(chooser.select([name for name, _, _ in named]))
    if chooser.active:
        toolset.resources.setdefault(FILTERS, list).append(chooser.to_json())
    for name, _attr, fn in named:
        if name not in kept:
            continue
        options: ToolOptions = getattr(fn, TOOL_MARK, None) or ToolOptions()
        try:
            toolset.add(Tool.from_function(fn, name=name, options=options), owner=owner)
        except ToolBindError as exc:
            toolset.quarantine(name, exc.fields["field"], exc.fields["rule"], owner=owner)
        except ToolNameError as exc:
            if "already taken" in exc.fields["rule"]:
                raise ConfigError(str(file), f"python[{index}]", exc.message) from exc
            toolset.quarantine(name, "name", exc.fields["rule"], owner=owner)


def bind_retrieval_source(
    toolset: Toolset,
    source: RetrievalSource,
    file: Path,
    index: int,
    registry: RetrievalRegistry,
) -> None:
    """Add the ``retrieve`` tool of one ``[[retrieval]]`` entry to ``toolset``.

    The corpus is read and pinned now (its digest is in the tool's fingerprint); the
    index is built on the first search and cached by fingerprint. ``backend =
    "fts5-bm25"`` is the built-in runtime; another name is looked up in ``registry``.

    Raises:
        ConfigError: the corpus folder is missing, empty, or holds a bad document, or
            the backend is unknown or broken.

    """
    try:
        corpus = load_corpus(file.parent / source.corpus)
    except InputError as exc:
        raise ConfigError(str(file), f"retrieval[{index}].corpus", exc.message) from None
    runtime: RetrievalBackend
    if source.backend != "fts5-bm25":
        try:
            runtime = registry.create(source.backend, corpus, source.model_dump(mode="json"))
        except InputError as exc:
            raise ConfigError(str(file), f"retrieval[{index}].backend", exc.message) from None
    else:
        runtime = RetrievalRuntime(
            corpus,
            chunking=ChunkConfig(max_bytes=source.max_chunk_bytes),
            index=IndexConfig(tokenizer=source.tokenizer),
            cache_dir=(file.parent / source.cache) if source.cache is not None else None,
        )

    async def close() -> None:
        runtime.close()

    toolset.add(runtime.as_tool(source.name), owner=f"retrieval:{source.corpus}")
    toolset.on_close(close)


def _set_exposure(toolset: Toolset, serve: ServeSection, file: Path) -> None:
    """Give ``toolset`` the ``[serve]`` policy; a glob matching no tool is a ConfigError."""
    exposure = Exposure(expose=tuple(serve.expose), hide=tuple(serve.hide))
    names = toolset.names() + [item.name for item in toolset.quarantined]
    unmatched = exposure.unmatched(names)
    if unmatched:
        key, index, glob = unmatched[0]
        raise ConfigError(
            str(file),
            f"serve.{key}[{index}]",
            f"glob {glob!r} matches no tool (tools: {', '.join(sorted(names)) or 'none'}; "
            "rule: each [serve] glob names at least one tool, so a misspelt one is noticed)",
        )
    toolset.set_exposure(exposure)


def extension_registry() -> ExtensionRegistry:
    """The registry a ``toolproof.toml`` binds its combos from.

    A new registry of the built-ins with the ``process`` and ``celery`` backends
    registered into it here, at the composition root, not by importing a package for
    its side effect. ``[extensions] modules`` and the ``toolproof.extensions`` entry
    points are loaded into it when a Toolset is built; the Toolset keeps it as
    ``toolset.resources[EXTENSIONS]``.

    Returns:
        A new registry on every call (no process-wide state).
    """
    registry = ExtensionRegistry()
    register_backends(registry)
    return registry


def lock_path_of(file: Path, config: ToolproofConfig) -> Path:
    """The lock file of the composition root ``file``: ``[lock] file``, relative to it."""
    return file.parent / config.lock.file


async def build_toolset(
    path: str | Path, *, lock: Path | bool = True, approver: Approver | None = None
) -> Toolset:
    """Build and seal the Toolset of a ``toolproof.toml``.

    Sources bind in this order: ``[[python]]``, ``[[retrieval]]``, ``[[mcp]]``; then
    the base tools are checked against the lock (when one exists); extensions apply
    last. On any error every resource already opened (MCP sessions) is closed.

    Args:
        path: the ``toolproof.toml`` file.
        lock: ``True``: the ``[lock]`` file when it exists; a path: that lock (it must
            exist); ``False``: no lock check (``toolproof lock`` itself).
        approver: the Python approval channel of every ``approve`` layer: ``async
            approver(request: ApprovalRequest) -> bool | Decision`` (docs/approvals.md);
            ``None``: decisions come from the store (``toolproof approvals``, HTTP).

    Raises:
        ConfigError: the file or one of its entries is invalid, the lock cannot be
            read, or ``[lock] on_drift = "refuse"`` and a tool drifted.

    """
    file = Path(path)
    config, raw = load_config(file)
    toolset = Toolset()
    toolset.resources[CONFIG_PATH] = str(file.resolve())
    toolset.resources[CONFIG] = config
    toolset.resources[RAW_CONFIG] = raw
    try:
        for index, source in enumerate(config.python):
            await import_python_source(source, file, index)
            bind_python_source(toolset, source, file, index)
        retrieval_backends = RetrievalRegistry()  # [[retrieval]] backend names: entry points
        for index, retrieval in enumerate(config.retrieval):
            bind_retrieval_source(toolset, retrieval, file, index, retrieval_backends)
        if config.mcp:
            from toolproof.tools.mcp import bind_mcp_servers

            first: dict[str, int] = {}
            for position, entry in enumerate(config.mcp):
                if entry.name in first:
                    raise ConfigError(
                        str(file),
                        f"mcp[{position}].name",
                        f"server name {entry.name!r} is already used by mcp[{first[entry.name]}]"
                        " (rule: [[mcp]] names are unique)",
                    )
                first[entry.name] = position
            servers = [entry.server(file.parent) for entry in config.mcp]
            await bind_mcp_servers(toolset, servers)
        lock_file = lock if isinstance(lock, Path) else lock_path_of(file, config)
        if lock is not False and (isinstance(lock, Path) or lock_file.is_file()):
            check_toolset_lock(toolset, lock_file, config.lock.on_drift)
        registry = toolset.resources[EXTENSIONS] = extension_registry()
        configure_extensions(
            toolset,
            file=file,
            modules=config.extensions.modules,
            tools={
                name: section.extensions
                for name, section in config.tools.items()
                if section.extensions is not None
            },
            backends=config.backends,
            registry=registry,
            approvals=raw.get("approvals", {}),
            approver=approver,
        )
        _set_exposure(toolset, config.serve, file)
    except BaseException:
        await toolset.aclose()
        raise
    return toolset.seal()


class ToolsetLoader:
    """What :func:`load_toolset` returns: awaitable, and an async context manager.

    ``async with load_toolset(path) as toolset:`` closes the Toolset on exit;
    ``toolset = await load_toolset(path)`` leaves closing (``await toolset.aclose()``)
    to the caller.
    """

    def __init__(
        self, path: str | Path, *, lock: Path | bool = True, approver: Approver | None = None
    ) -> None:
        self.path = Path(path)
        self.lock = lock
        self.approver = approver
        self._toolset: Toolset | None = None

    def __await__(self) -> Generator[Any, None, Toolset]:
        return build_toolset(self.path, lock=self.lock, approver=self.approver).__await__()

    async def __aenter__(self) -> Toolset:
        self._toolset = await build_toolset(self.path, lock=self.lock, approver=self.approver)
        return self._toolset

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._toolset is not None:
            await self._toolset.aclose()


def load_toolset(
    path: str | Path, *, lock: Path | bool = True, approver: Approver | None = None
) -> ToolsetLoader:
    """Load the sealed Toolset of a ``toolproof.toml`` (the composition root).

    Args:
        path: the ``toolproof.toml`` file.
        lock: as :func:`build_toolset`: the default checks ``toolproof.lock`` when present.
        approver: as :func:`build_toolset`: the approver callback of ``approve`` layers.

    Returns:
        A :class:`ToolsetLoader`: use ``async with load_toolset(path) as toolset`` (closed
        on exit) or ``toolset = await load_toolset(path)``.

    Raises:
        ConfigError: (when awaited or entered) the file or an entry is invalid.

    """
    return ToolsetLoader(path, lock=lock, approver=approver)
