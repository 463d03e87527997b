"""The retrieval seam: what a retriever offers a run.

The built-in :class:`~toolproof.sources.retrieval.fts5.Fts5Retriever` (SQLite FTS5,
BM25) meets it; so must a plugin's (an external index, a search service). The
retriever is bound into the Toolset as a tool (``as_tool``) whose source carries
the fingerprint, so a changed corpus, chunking or index configuration changes
the tool's fingerprint and hence the runtime descriptor and the run id. Its hits
must carry the exact text of the chunk, so the ``retrieve`` step stores the bytes
supports cite; frozen replay serves the recorded tool result.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from toolproof.errors import InputError
from toolproof.evidence.corpus import Corpus
from toolproof.plugins.loading import plugin_error
from toolproof.plugins.registry import Registry
from toolproof.tools.tool import Tool

__all__ = ["RetrievalFactory", "RetrievalRegistry", "Retriever"]


@runtime_checkable
class Retriever(Protocol):
    """A retriever: a stable identity and a ``retrieve`` tool.

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
        """The retriever as a tool whose ``source`` includes :attr:`fingerprint`."""
        ...

    def close(self) -> None:
        """Release the index."""
        ...


RetrievalFactory = Callable[[Corpus, dict[str, Any]], Retriever]
"""``factory(corpus, options) -> Retriever``: the pinned corpus and the
``[[retrieval]]`` entry as JSON."""


class RetrievalRegistry(Registry[RetrievalFactory]):
    """Retriever factories by name: in code, then ``toolproof.retrieval`` entry points.

    The built-in ``fts5-bm25`` retriever is not a name here (it is the default the
    composition root binds itself); the root builds this registry and passes it to
    the ``[[retrieval]]`` binding.
    """

    def __init__(self) -> None:
        super().__init__("retrieval")

    def accept(self, name: str, item: object, origin: str) -> RetrievalFactory:
        """An entry point's object must be a factory (a callable).

        Raises:
            InputError: it is not (naming the plugin, its origin and the rule).

        """
        if not callable(item):
            raise plugin_error("retrieval", name, origin, "the entry point is not a factory")
        return typing.cast(RetrievalFactory, item)

    def create(self, name: str, corpus: Corpus, options: dict[str, Any]) -> Retriever:
        """Build the retriever ``name`` over ``corpus``.

        Args:
            name: the retriever's name (``[[retrieval]] retriever``).
            corpus: the pinned corpus.
            options: the ``[[retrieval]]`` entry as JSON.

        Returns:
            The retriever.

        Raises:
            InputError: no such plugin, or it is broken (it names the plugin and the rule).

        """
        factory, origin = self.require(
            name,
            f"unknown retriever {name!r}: the built-in one is 'fts5-bm25' and no "
            "'toolproof.retrieval' entry point has that name",
        )
        try:
            retriever = factory(corpus, options)
        except InputError:
            raise
        except Exception as exc:  # foreign factory: reported, naming the plugin
            rule = f"its factory raised {type(exc).__name__}: {exc}"
            raise plugin_error("retrieval", name, origin, rule) from exc
        if not isinstance(retriever, Retriever):
            rule = (
                f"its factory returned {type(retriever).__name__}, which lacks kind/name/version/"
                "fingerprint/descriptor/as_tool/close"
            )
            raise plugin_error("retrieval", name, origin, rule)
        return retriever
