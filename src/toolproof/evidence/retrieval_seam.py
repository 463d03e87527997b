"""The retrieval seam: what a retrieval runtime offers a run.

The built-in :class:`~toolproof.evidence.retrieval.RetrievalRuntime` (SQLite FTS5,
BM25) meets it; so must a plugin's (an external index, a search service). The
runtime is bound into the Toolset as a tool (``as_tool``) whose source carries
the fingerprint, so a changed corpus, chunking or index configuration changes
the tool's fingerprint and hence the runtime descriptor and the run id. Its hits
must carry the exact text of the chunk, so the ``retrieve`` step stores the bytes
supports cite; frozen replay serves the recorded tool result.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from toolproof.tools.tool import Tool

__all__ = ["RetrievalBackend"]


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
