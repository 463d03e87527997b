"""Binding a ``toolproof.toml``'s sources: ``[[python]]`` modules, ``[[retrieval]]`` corpora.

A ``[[python]]`` module is imported in a thread of its own within its
``import_timeout`` (:func:`import_python_source`), then its marked functions become
tools (:func:`bind_python_source`); a ``[[retrieval]]`` corpus is pinned and served
by a ``retrieve`` tool (:func:`bind_retrieval_source`), the built-in FTS5 retriever or
one from the retrieval registry the composition root passes. ``[[mcp]]`` servers
are bound by :mod:`toolproof.sources.mcp.source`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
import threading
import typing
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import Any

from toolproof.config.schema import PythonSource, RetrievalSource
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
from toolproof.sources.retrieval.fts5 import Fts5Retriever, IndexConfig
from toolproof.sources.retrieval.seam import RetrievalRegistry, Retriever
from toolproof.tools.filters import ToolFilter
from toolproof.tools.function import TOOL_MARK, ToolOptions
from toolproof.tools.python_catalog import bind_python_catalog
from toolproof.tools.resources import FILTERS
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset

__all__ = ["bind_python_source", "bind_retrieval_source", "import_python_source"]


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
    index is built on the first search and cached by fingerprint. ``retriever =
    "fts5-bm25"`` is the built-in retriever; another name is looked up in ``registry``.

    Raises:
        ConfigError: the corpus folder is missing, empty, or holds a bad document, or
            the retriever is unknown or broken.

    """
    try:
        corpus = load_corpus(file.parent / source.corpus)
    except InputError as exc:
        raise ConfigError(str(file), f"retrieval[{index}].corpus", exc.message) from None
    retriever: Retriever
    if source.retriever != "fts5-bm25":
        try:
            retriever = registry.create(source.retriever, corpus, source.model_dump(mode="json"))
        except InputError as exc:
            raise ConfigError(str(file), f"retrieval[{index}].retriever", exc.message) from None
    else:
        retriever = Fts5Retriever(
            corpus,
            chunking=ChunkConfig(max_bytes=source.max_chunk_bytes),
            index=IndexConfig(tokenizer=source.tokenizer),
            cache_dir=(file.parent / source.cache) if source.cache is not None else None,
        )

    async def close() -> None:
        retriever.close()

    toolset.add(retriever.as_tool(source.name), owner=f"retrieval:{source.corpus}")
    toolset.on_close(close)
