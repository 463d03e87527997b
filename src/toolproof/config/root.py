"""Building the sealed Toolset of a ``toolproof.toml``: sources, lock, registries, exposure.

:func:`build_toolset` binds the sources (:mod:`toolproof.config.sources`) in file
order, checks the lock, builds the registries the Toolset binds from (extensions
with the ``process`` and ``celery`` backends, retrievers) and applies the
extensions and the ``[serve]`` policy. The file's format is described in
:mod:`toolproof.config`.
"""

from __future__ import annotations

from collections.abc import Generator
from fnmatch import fnmatchcase
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from toolproof.backends import register_backends
from toolproof.config.registries import run_registries
from toolproof.config.schema import (
    PolicySection,
    ServeSection,
    ToolproofConfig,
    ToolSection,
    load_config,
)
from toolproof.config.sources import (
    bind_python_source,
    bind_retrieval_source,
    import_python_source,
)
from toolproof.errors import ConfigError
from toolproof.extensions.approvals.request import Approver
from toolproof.extensions.config import configure_extensions
from toolproof.extensions.registry import ExtensionRegistry
from toolproof.schema.isolation import ValidationBounds, configure_validation
from toolproof.sources.retrieval.seam import RetrievalRegistry
from toolproof.tools.asking import ASKERS, Ask, Askers
from toolproof.tools.exposure import Exposure
from toolproof.tools.lint_toolset import apply_lint
from toolproof.tools.lock import check_toolset_lock, check_variant_lock
from toolproof.tools.policy import PolicyError, PolicySet, tool_attributes
from toolproof.tools.resources import CONFIG_PATH, RAW_CONFIG, ResourceKey
from toolproof.tools.toolset import Toolset

if TYPE_CHECKING:  # the MCP SDK is imported only when a [[mcp]] entry is loaded
    from toolproof.sources.mcp.login import LoginOutcome
    from toolproof.sources.mcp.oauth import Authorizer

__all__ = [
    "CONFIG",
    "EXTENSIONS",
    "ToolsetLoader",
    "build_toolset",
    "extension_registry",
    "load_toolset",
    "lock_path_of",
    "run_registries",
]


CONFIG = ResourceKey[ToolproofConfig]("config.parsed")
"""The validated ``toolproof.toml`` a Toolset was built from (``toolset.resources[CONFIG]``)."""

EXTENSIONS = ResourceKey[ExtensionRegistry]("config.extensions")
"""The extension registry a Toolset's combos were bound from (built-ins, backends,
``[extensions] modules`` and entry points)."""


def _set_exposure(toolset: Toolset, serve: ServeSection, file: Path) -> None:
    """Give ``toolset`` the ``[serve]`` policy; a glob matching no tool is a ConfigError."""
    exposure = Exposure(expose=tuple(serve.expose), hide=tuple(serve.hide))
    names = toolset.names() + [item.name for item in toolset.quarantined]
    unmatched = exposure.unmatched(names)
    tasks = [("tasks", index, glob) for index, glob in enumerate(serve.tasks or ())]
    unmatched += [item for item in tasks if not any(fnmatchcase(n, item[2]) for n in names)]
    if unmatched:
        key, index, glob = unmatched[0]
        raise ConfigError(
            str(file),
            f"serve.{key}[{index}]",
            f"glob {glob!r} matches no tool (tools: {', '.join(sorted(names)) or 'none'}; "
            "rule: each [serve] glob names at least one tool, so a misspelt one is noticed)",
        )
    toolset.set_exposure(exposure)


def _load_policy(toolset: Toolset, section: PolicySection, file: Path) -> None:
    """Read ``[policy] files`` (globs relative to ``file``) into the Toolset's policy set.

    Raises:
        ConfigError: a glob that matches no file, an unreadable file, one Cedar
            cannot parse, or one naming an attribute no request has (naming the file,
            the line and Cedar's message).

    """
    base = file.parent
    files: list[tuple[str, str]] = []
    for index, pattern in enumerate(section.files):
        found = sorted(path for path in base.glob(pattern) if path.is_file())
        if not found:
            raise ConfigError(
                str(file), f"policy.files[{index}]", f"glob {pattern!r} matches no file"
            )
        for path in found:
            name = path.relative_to(base).as_posix()
            if any(name == seen for seen, _ in files):
                continue
            try:
                files.append((name, path.read_text(encoding="utf-8")))
            except (OSError, UnicodeError) as exc:
                raise ConfigError(str(file), f"policy.files[{index}]", f"{name}: {exc}") from exc
    try:
        tools = {tool.name: tool_attributes(tool) for tool in toolset}
        policy = PolicySet(tuple(files), section.default, tools)
        known = [tool.name for tool in toolset] + [item.name for item in toolset.quarantined]
        policy.check_attributes((tool.spec.input_schema for tool in toolset), known)
        toolset.set_policy(policy)
    except PolicyError as exc:
        raise ConfigError(str(file), "policy.files", str(exc)) from exc


def _declare_idempotency(toolset: Toolset, tools: dict[str, ToolSection], file: Path) -> None:
    """Give each bound tool its ``[tools.NAME] idempotency`` (a ConfigError for an unknown NAME).

    A NAME that was quarantined is left alone (its quarantine says why it is missing).
    """
    quarantined = {item.name for item in toolset.quarantined}
    for name, section in tools.items():
        if section.idempotency is None or name in quarantined:
            continue
        tool = toolset.get(name)
        if tool is None:
            raise ConfigError(
                str(file),
                f"tools.{name}.idempotency",
                f"no tool {name!r} is bound (tools: {', '.join(toolset.names()) or 'none'}; "
                "rule: idempotency declares what a bound tool's body does)",
            )
        if tool.spec.idempotency != section.idempotency:
            spec = tool.spec.model_copy(update={"idempotency": section.idempotency})
            stack, config = tool.stack, tool.config
            toolset.replace(tool.rebind(spec, base=tool.base, stack=stack, config=config))


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
    path: str | Path,
    *,
    lock: Path | bool = True,
    approver: Approver | None = None,
    askers: Askers | None = None,
    authorizer: Authorizer | None = None,
) -> Toolset:
    """Build and seal the Toolset of a ``toolproof.toml``.

    Sources bind in this order: ``[[python]]``, ``[[retrieval]]``, ``[[mcp]]``; each
    ``[tools.NAME] idempotency`` is given to its tool; then
    the base tools are linted (a tool with a finding at or above ``[lint] fail_on`` is
    quarantined, :func:`toolproof.tools.lint_toolset.apply_lint`) and checked against
    the lock (when one exists); extensions apply,
    and their variants are checked against the same lock. On any error every resource
    already opened (MCP sessions) is closed.

    Args:
        path: the ``toolproof.toml`` file.
        lock: ``True``: the ``[lock]`` file when it exists; a path: that lock (it must
            exist); ``False``: no lock check (``toolproof lock`` itself).
        approver: the Python approval channel of every ``approve`` layer: ``async
            approver(request: ApprovalRequest) -> bool | Decision`` (docs/approvals.md);
            ``None``: decisions come from the store (``toolproof approvals``, HTTP).
        askers: who answers the ``[[mcp]]`` servers' sampling and elicitation requests
            (:class:`~toolproof.tools.asking.Askers`, kept as ``resources[ASKERS]``); the
            servers are told the client can sample or elicit only when it can.
            ``None``: nobody (nothing announced).
        authorizer: who completes an OAuth authorization-code grant an ``[mcp.auth]``
            server asks for during the load or a call (a step-up on ``403
            insufficient_scope``, a refresh the server refused):
            :class:`~toolproof.sources.mcp.oauth.Authorizer`. ``None``: nobody; the
            tokens ``toolproof mcp login`` stored are used and refreshed.

    Raises:
        ConfigError: the file or one of its entries is invalid, the lock cannot be
            read, or ``[lock] on_drift = "refuse"`` and a tool drifted.

    """
    file = Path(path)
    config, raw = load_config(file)
    if config.validation is not None:
        bounds = config.validation
        configure_validation(
            ValidationBounds(bounds.seconds, bounds.memory_mib << 20, bounds.workers)
        )
    toolset = Toolset()
    toolset.resources[CONFIG_PATH] = str(file.resolve())
    toolset.resources[CONFIG] = config
    toolset.resources[RAW_CONFIG] = raw
    if askers is not None:
        toolset.resources[ASKERS] = askers
    try:
        for index, source in enumerate(config.python):
            await import_python_source(source, file, index)
            bind_python_source(toolset, source, file, index)
        retrievers = RetrievalRegistry()  # [[retrieval]] retriever names: entry points
        for index, retrieval in enumerate(config.retrieval):
            bind_retrieval_source(toolset, retrieval, file, index, retrievers)
        if config.mcp:
            from toolproof.sources.mcp.source import bind_mcp_servers

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
            servers = [entry.server(file.parent, authorizer) for entry in config.mcp]
            await bind_mcp_servers(toolset, servers)
        _declare_idempotency(toolset, config.tools, file)
        apply_lint(toolset, config.lint.fail_on, [entry.allow() for entry in config.lint.allow])
        lock_file = lock if isinstance(lock, Path) else lock_path_of(file, config)
        locked = lock is not False and (isinstance(lock, Path) or lock_file.is_file())
        if locked:
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
        if locked:
            check_variant_lock(toolset, lock_file, config.lock.on_drift)
        _set_exposure(toolset, config.serve, file)
        if config.policy is not None:
            _load_policy(toolset, config.policy, file)
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
        self,
        path: str | Path,
        *,
        lock: Path | bool = True,
        approver: Approver | None = None,
        askers: Askers | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.path = Path(path)
        self.lock = lock
        self.approver = approver
        self.askers = askers
        self.authorizer = authorizer
        self._toolset: Toolset | None = None

    def __await__(self) -> Generator[Any, None, Toolset]:
        return self._build().__await__()

    async def _build(self) -> Toolset:
        return await build_toolset(
            self.path,
            lock=self.lock,
            approver=self.approver,
            askers=self.askers,
            authorizer=self.authorizer,
        )

    async def __aenter__(self) -> Toolset:
        self._toolset = await self._build()
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
    path: str | Path,
    *,
    lock: Path | bool = True,
    approver: Approver | None = None,
    sample: Ask | None = None,
    elicit: Ask | None = None,
    relay: bool = False,
    authorizer: Authorizer | None = None,
) -> ToolsetLoader:
    """Load the sealed Toolset of a ``toolproof.toml`` (the composition root).

    Args:
        path: the ``toolproof.toml`` file.
        lock: as :func:`build_toolset`: the default checks ``toolproof.lock`` when present.
        approver: as :func:`build_toolset`: the approver callback of ``approve`` layers.
        sample: ``async sample(params) -> result``: answers the ``[[mcp]]`` servers'
            ``sampling/createMessage`` requests (``CreateMessageRequestParams`` in, a
            ``CreateMessageResult`` out, MCP wire form); ``sampling`` is announced to
            them only with it. Also what a Python tool's ``Context.sample`` asks in a
            recording session. ``None``: nobody samples.
        elicit: ``async elicit(params) -> result``: the same for ``elicitation/create``
            (``ElicitRequestParams`` in, an ``ElicitResult`` out: ``action`` and, when
            accepted, ``content``). ``None``: nobody answers.
        relay: ``toolproof serve`` sets it: the ``[[mcp]]`` servers' sampling and
            elicitation requests are relayed to the client it serves, so both
            capabilities are announced to them (docs/mcp.md).
        authorizer: as :func:`build_toolset`: who completes an OAuth grant an
            ``[mcp.auth]`` server asks for (docs/mcp.md, *OAuth*); ``None``: nobody.

    Returns:
        A :class:`ToolsetLoader`: use ``async with load_toolset(path) as toolset`` (closed
        on exit) or ``toolset = await load_toolset(path)``.

    Raises:
        ConfigError: (when awaited or entered) the file or an entry is invalid.

    """
    askers = Askers(sample, elicit, relay) if (sample or elicit or relay) else None
    return ToolsetLoader(path, lock=lock, approver=approver, askers=askers, authorizer=authorizer)


async def mcp_login(
    path: str | Path,
    name: str,
    authorizer: Authorizer,
    *,
    timeout: float | None = None,
) -> LoginOutcome:
    """Log in to the ``[[mcp]]`` server ``name`` of a ``toolproof.toml`` (OAuth 2.1).

    The person's side is ``authorizer``
    (:class:`~toolproof.sources.mcp.login.LocalhostAuthorizer` for a browser); the
    tokens are stored in the server's token file (``0600``) for every later load. See
    :func:`toolproof.sources.mcp.login.login` and docs/mcp.md (*OAuth*).

    Args:
        path: the ``toolproof.toml`` file.
        name: the ``[[mcp]]`` entry's ``name``.
        authorizer: who authorizes.
        timeout: seconds the whole login may take (``None``: 600).

    Returns:
        The granted scope, the token file, whether the grant refreshes, the tool count.

    Raises:
        ConfigError: the file is invalid, or has no ``[[mcp]]`` named ``name`` with a
            ``url`` and an ``[mcp.auth]``, or that server's grant is ``client_credentials``
            (no person logs in).
        OAuthSetupError: the auth table cannot be used.
        McpStartError: the flow or the connection failed (naming the step, no token).

    """
    from toolproof.sources.mcp.login import LOGIN_TIMEOUT, login

    file = Path(path)
    config, _ = load_config(file)
    names = [entry.name for entry in config.mcp]
    if name not in names:
        raise ConfigError(
            str(file), "mcp", f"no [[mcp]] named {name!r} (servers: {', '.join(names) or 'none'})"
        )
    position = names.index(name)
    entry = config.mcp[position]
    if entry.url is None:
        raise ConfigError(
            str(file),
            f"mcp[{position}]",
            f"{name} is a stdio server: OAuth applies to HTTP servers only",
        )
    if entry.auth is not None and (
        entry.auth.grant == "client_credentials"
        or (entry.auth.grant is None and entry.auth.client_secret_env is not None)
    ):
        raise ConfigError(
            str(file),
            f"mcp[{position}].auth",
            f"{name} uses client credentials: no login needed (loads get the token)",
        )
    if entry.auth is None:
        raise ConfigError(
            str(file),
            f"mcp[{position}].auth",
            f"server {name!r} has no [mcp.auth] (rule: mcp login is for streamable-HTTP "
            "servers ('url') with an auth table)",
        )
    server = entry.server(file.parent)
    return await login(server, authorizer, timeout=timeout or LOGIN_TIMEOUT)
