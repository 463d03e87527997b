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
    idempotency = "key"         # optional: the tool honours the call's idempotency key

    [backends.celery]
    broker = "redis://127.0.0.1:6379/0"

    [serve]                     # what the outward faces expose (see docs/approvals.md)
    expose = ["add_cache"]      # tool-name globs shown although a sibling is gated
    hide = ["debug_*"]          # tool-name globs never shown
    tasks = ["add_process"]     # MCP tasks (docs/serve.md; default: process/celery tools)

    [approvals]                 # the policy of the approve wrapper (docs/approvals.md)
    store = "approvals.sqlite"
    timeout_seconds = 600
    mode = "wait"               # | "defer"

    [validation]                # bounds of one call's validation in a worker (isolated schemas)
    seconds = 5
    memory_mib = 1024
    workers = 2

    [grounding]                 # how far an agent's answer is checked (docs/grounding.md)
    level = "details"           # | "quote"
    min_quote_words = 3         # a shorter quote supports nothing on its own

    [lint]                      # tool-description lint at load (see docs/lint.md)
    fail_on = "high"            # | "medium" | "low" | "never"
    allow = [{tool = "keys_*", rule = "secret-path", reason = "manages SSH keys"}]

    [lock]                      # toolproof.lock beside the file (see docs/lock.md)
    on_drift = "quarantine"     # | "refuse" | "warn"
    file = "toolproof.lock"     # optional: another lock file

Every error is a :class:`toolproof.errors.ConfigError` naming the file, the key and
the rule.

The package has four modules: ``schema`` (the file's models and the errors that
name the key), ``sources`` (binding ``[[python]]`` and ``[[retrieval]]``) and
``root`` (building the sealed Toolset: the registries it binds from, the lock
check, the exposure policy). The registries a Toolset binds from (extensions,
retrievers) are built in ``root`` and passed down; a run's (reasoners,
checks, runtimes) are a :class:`~toolproof.runs.registries.RunRegistries` that
:func:`run_registries` (in ``registries``, which imports nothing else of the root)
builds and the faces give the run. Each exported name is imported from its module on
first use, so ``from toolproof.config import run_registries`` loads no backend.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolproof.config.registries import run_registries
    from toolproof.config.root import (
        CONFIG,
        EXTENSIONS,
        ToolsetLoader,
        build_toolset,
        extension_registry,
        load_toolset,
        lock_path_of,
        mcp_login,
    )
    from toolproof.config.schema import (
        ExtensionsSection,
        GroundingSection,
        LintAllow,
        LintSection,
        LockSection,
        McpSource,
        PythonSource,
        RetrievalSource,
        ServeSection,
        TelemetrySection,
        ToolproofConfig,
        ToolSection,
        ValidationSection,
        load_config,
    )
    from toolproof.config.sources import (
        bind_python_source,
        bind_retrieval_source,
        import_python_source,
    )

__all__ = [
    "CONFIG",
    "EXTENSIONS",
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
    "ToolsetLoader",
    "ValidationSection",
    "bind_python_source",
    "bind_retrieval_source",
    "build_toolset",
    "extension_registry",
    "import_python_source",
    "load_config",
    "load_toolset",
    "lock_path_of",
    "mcp_login",
    "run_registries",
]

_MODULE_OF = {
    **dict.fromkeys(
        ("CONFIG", "EXTENSIONS", "ToolsetLoader", "build_toolset", "extension_registry"),
        "toolproof.config.root",
    ),
    **dict.fromkeys(("load_toolset", "lock_path_of", "mcp_login"), "toolproof.config.root"),
    "run_registries": "toolproof.config.registries",
    **dict.fromkeys(
        ("bind_python_source", "bind_retrieval_source", "import_python_source"),
        "toolproof.config.sources",
    ),
}
"""Where each exported name lives; the rest live in ``toolproof.config.schema``."""


def __getattr__(name: str) -> Any:
    """Import the module of an exported name on first use (PEP 562).

    ``toolproof verify`` needs :func:`run_registries` only; importing every backend,
    source and extension the root binds from cost it a fifth of its start.

    Raises:
        AttributeError: ``name`` is not exported by :mod:`toolproof.config`.

    """
    if name not in __all__:
        raise AttributeError(f"module 'toolproof.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF.get(name, "toolproof.config.schema")), name)
    globals()[name] = value
    return value
