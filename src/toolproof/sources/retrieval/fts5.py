"""Retrieval over a pinned corpus: an embedded SQLite FTS5 index ranked by BM25, a tool source.

The index is built once per (corpus digest, chunking, index configuration) and
cached as a SQLite file named by that fingerprint; a build writes a temporary
file and renames it into place, so a crash never leaves a half-built index that a
later run would trust. Ranking is FTS5's ``bm25()`` (k1 = 1.2, b = 0.75), ties
broken by chunk order, so results are deterministic for a given corpus,
configuration and query.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolproof.contract.tools import ToolAnnotations, ToolSpec
from toolproof.errors import InputError
from toolproof.evidence.chunking import Chunk, ChunkConfig, chunk_corpus
from toolproof.evidence.corpus import Corpus
from toolproof.evidence.terms import query_terms
from toolproof.identity import digest_json
from toolproof.tools.tool import Tool

__all__ = ["Fts5Retriever", "Hit", "IndexConfig"]


@dataclass(frozen=True)
class IndexConfig:
    """How the index tokenizes and ranks; part of the retrieval fingerprint.

    Attributes:
        tokenizer: the FTS5 tokenizer declaration.
        ranking: ``bm25`` (FTS5's built-in).
    """

    tokenizer: str = "porter unicode61 remove_diacritics 2"
    ranking: str = "bm25"

    def to_json(self) -> dict[str, str]:
        """The configuration as JSON, for fingerprints."""
        return {"tokenizer": self.tokenizer, "ranking": self.ranking}


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk.

    Attributes:
        rank: 1-based position in the result list.
        score: BM25 relevance (higher is better), rounded to 6 decimals.
        chunk: the chunk, with its exact bytes.
    """

    rank: int
    score: float
    chunk: Chunk

    def to_json(self) -> dict[str, Any]:
        """The hit as JSON: rank, score, document, offsets, chunk id and text."""
        return {
            "rank": self.rank,
            "score": self.score,
            "chunk_id": self.chunk.chunk_id,
            "document": self.chunk.document,
            "start": self.chunk.start,
            "end": self.chunk.end,
            "text": self.chunk.data.decode("utf-8"),
        }


@dataclass
class Fts5Retriever:
    """Ranked retrieval over one pinned corpus.

    Args:
        corpus: the corpus.
        chunking: the chunking configuration.
        index: the index configuration.
        cache_dir: where index files are cached (default: ``$TOOLPROOF_CACHE`` or
            ``~/.cache/toolproof``, subfolder ``index``).
    """

    corpus: Corpus
    chunking: ChunkConfig = field(default_factory=ChunkConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    cache_dir: Path | None = None
    kind: str = "retrieval"
    name: str = "fts5-bm25"
    version: str = "1"

    def __post_init__(self) -> None:
        self._chunks: list[Chunk] | None = None
        self._conn: sqlite3.Connection | None = None

    def configuration(self) -> dict[str, Any]:
        """Everything that decides results: corpus digest, chunking, index configuration."""
        return {
            "corpus": self.corpus.digest,
            "chunking": self.chunking.to_json(),
            "index": self.index.to_json(),
        }

    @property
    def fingerprint(self) -> str:
        """``sha256:...`` over kind, name, version and :meth:`configuration`."""
        return digest_json(
            {
                "kind": self.kind,
                "name": self.name,
                "version": self.version,
                "configuration": self.configuration(),
            }
        )

    def descriptor(self) -> dict[str, Any]:
        """Kind, name, version, fingerprint, configuration and the corpus pins."""
        return {
            "kind": self.kind,
            "name": self.name,
            "version": self.version,
            "fingerprint": self.fingerprint,
            "configuration": self.configuration(),
            "documents": self.corpus.pins(),
        }

    @property
    def chunks(self) -> list[Chunk]:
        """Every chunk of the corpus, in document then offset order."""
        if self._chunks is None:
            self._chunks = chunk_corpus(self.corpus, self.chunking)
        return self._chunks

    def index_path(self) -> Path:
        """The cached index file for this fingerprint."""
        base = self.cache_dir
        if base is None:
            env = os.environ.get("TOOLPROOF_CACHE")
            base = Path(env) if env else Path.home() / ".cache" / "toolproof"
            base = base / "index"
        return base / f"{self.fingerprint.removeprefix('sha256:')}.sqlite"

    def _build(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".index-", suffix=".sqlite", dir=path.parent)
        os.close(handle)
        try:
            conn = sqlite3.connect(temp)
            try:
                tokenizer = self.index.tokenizer.replace("'", "''")
                conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='{tokenizer}')")
                conn.executemany(
                    "INSERT INTO fts(rowid, text) VALUES (?, ?)",
                    (
                        (number, chunk.data.decode("utf-8"))
                        for number, chunk in enumerate(self.chunks)
                    ),
                )
                conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
                conn.execute(
                    "INSERT INTO meta VALUES ('fingerprint', ?), ('chunks', ?)",
                    (self.fingerprint, str(len(self.chunks))),
                )
                conn.commit()
            finally:
                conn.close()
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        path = self.index_path()
        if not self._valid_index(path):
            self._build(path)
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        return self._conn

    def _valid_index(self, path: Path) -> bool:
        if not path.exists():
            return False
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            finally:
                conn.close()
        except sqlite3.Error:
            return False
        return rows.get("fingerprint") == self.fingerprint and rows.get("chunks") == str(
            len(self.chunks)
        )

    def search(self, query: str, top_k: int = 5) -> list[Hit]:
        """Return up to ``top_k`` chunks ranked by BM25 for the content words of ``query``.

        Raises:
            InputError: ``top_k`` is not between 1 and 100.
        """
        if not 1 <= top_k <= 100:
            raise InputError(
                f"top_k must be between 1 and 100, got {top_k}", field="top_k", rule="1..100"
            )
        terms = query_terms(query)
        if not terms:
            return []
        expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        rows = (
            self._connection()
            .execute(
                "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? "
                "ORDER BY bm25(fts), rowid LIMIT ?",
                (expression, top_k),
            )
            .fetchall()
        )
        chunks = self.chunks
        return [
            Hit(rank, round(-float(score), 6) + 0.0, chunks[rowid])
            for rank, (rowid, score) in enumerate(rows, start=1)
        ]

    def result(self, query: str, top_k: int = 5) -> dict[str, Any]:
        """The ``retrieve`` tool's value: the query, the corpus pin and the hits.

        Returns:
            ``{"query", "corpus" (digest), "chunking", "index", "hits": [...]}``; each hit
            has rank, score, chunk id, document, document digest, byte offsets in the
            document and the chunk text (the chunk's exact bytes, decoded as UTF-8).
        """
        digests = {doc.path: doc.digest for doc in self.corpus.documents}
        hits = []
        for hit in self.search(query, top_k):
            item = hit.to_json()
            item["document_digest"] = digests[hit.chunk.document]
            hits.append(item)
        return {
            "query": query,
            "corpus": self.corpus.digest,
            "chunking": self.chunking.to_json(),
            "index": self.index.to_json(),
            "hits": hits,
        }

    def as_tool(self, name: str = "retrieve") -> Tool:
        """The retriever as a ``retrieve(query, top_k)`` tool whose value is :meth:`result`."""
        spec = ToolSpec(
            name=name,
            description=(
                "Search the pinned corpus and return the best-matching chunks with their "
                "document, byte offsets, BM25 score and text."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                    "top_k": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 100,
                        "default": 5,
                        "description": "How many chunks to return.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            annotations=ToolAnnotations(
                readOnlyHint=True, idempotentHint=True, openWorldHint=False
            ),
        )

        async def body(arguments: dict[str, Any]) -> Any:
            return self.result(arguments["query"], arguments.get("top_k", 5))

        return Tool(spec, body, source=f"retrieval:{self.name}:{self.fingerprint}")

    def close(self) -> None:
        """Close the index connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
