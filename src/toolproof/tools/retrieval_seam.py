"""The retrieval seam: what a retrieval runtime offers a run.

The built-in :class:`~toolproof.tools.retrieval.RetrievalRuntime` (SQLite FTS5,
BM25) meets it; so must a plugin's (an external index, a search service). The
runtime is bound into the Toolset as a tool (``as_tool``) whose source carries
the fingerprint, so a changed corpus, chunking or index configuration changes
the tool's fingerprint and hence the runtime descriptor and the run id. Its hits
must carry the exact text of the chunk, so the ``retrieve`` step stores the bytes
supports cite; frozen replay serves the recorded tool result.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from toolproof.errors import InputError
from toolproof.evidence.corpus import Corpus
from toolproof.plugins.loading import load_plugin, plugin_error
from toolproof.tools.tool import Tool

__all__ = ["RetrievalBackend", "retrieval_plugin"]


@runtime_checkable
class RetrievalBackend(Protocol):
    """A retrieval runtime: a stable identity and a ``retrieve`` tool.

    Attributes:
        kind: ``retrieval``.
        name: the implementation (``fts5-bm25``).
        version: bump it when ranking or chunking changes.

    """

    kind: str
    name: str
    version: str

    @property
    def fingerprint(self) -> str:
        """``sha256:`` over kind, name, version and every setting that decides results."""
        ...

    def descriptor(self) -> dict[str, Any]:
        """Kind, name, version, fingerprint and configuration, as JSON."""
        ...

    def as_tool(self, name: str = "retrieve") -> Tool:
        """The runtime as a tool whose ``source`` includes :attr:`fingerprint`."""
        ...

    def close(self) -> None:
        """Release the index."""
        ...


def retrieval_plugin(name: str, corpus: Corpus, options: dict[str, Any]) -> RetrievalBackend:
    """Build the retrieval runtime ``name`` of the ``toolproof.retrieval`` group.

    Args:
        name: the entry point's name (``[[retrieval]] backend``).
        corpus: the pinned corpus.
        options: the ``[[retrieval]]`` entry as JSON.

    Returns:
        The runtime.

    Raises:
        InputError: no such plugin, or it is broken (it names the plugin and the rule).

    """
    loaded = load_plugin("retrieval", name)
    if loaded is None:
        raise InputError(
            f"unknown retrieval backend {name!r}: the built-in one is 'fts5-bm25' and no "
            "'toolproof.retrieval' entry point has that name",
            plugin=name,
            kind="retrieval",
            rule="unknown",
        )
    factory, origin = loaded
    if not callable(factory):
        raise plugin_error("retrieval", name, origin, "the entry point is not a factory")
    try:
        runtime = factory(corpus, options)
    except InputError:
        raise
    except Exception as exc:  # foreign factory: reported, naming the plugin
        rule = f"its factory raised {type(exc).__name__}: {exc}"
        raise plugin_error("retrieval", name, origin, rule) from exc
    if not isinstance(runtime, RetrievalBackend):
        rule = (
            f"its factory returned {type(runtime).__name__}, which lacks kind/name/version/"
            "fingerprint/descriptor/as_tool/close"
        )
        raise plugin_error("retrieval", name, origin, rule)
    return runtime
