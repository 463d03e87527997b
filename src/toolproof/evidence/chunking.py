"""Chunking documents into byte ranges.

A chunk is a byte interval ``[start, end)`` of a document's text bytes; its bytes
are exactly ``document.data[start:end]``, so a chunk stored as evidence cites back
to its document by offsets. Paragraphs (runs of non-blank lines) are packed into
chunks of at most ``max_bytes``; a longer paragraph is split at line ends, and a
longer line at a UTF-8 character boundary. Chunk edges never cut a character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolproof.evidence.corpus import Corpus, Document

__all__ = ["Chunk", "ChunkConfig", "chunk_corpus", "chunk_document"]

_PARAGRAPH = re.compile(rb"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*")


@dataclass(frozen=True)
class ChunkConfig:
    """How documents are cut into chunks; part of the retrieval fingerprint.

    Attributes:
        max_bytes: the largest chunk, in bytes (>= 64).
        strategy: ``paragraphs`` (the only one today).
    """

    max_bytes: int = 1500
    strategy: str = "paragraphs"

    def __post_init__(self) -> None:
        if self.max_bytes < 64:
            raise ValueError(f"chunk max_bytes must be >= 64, got {self.max_bytes}")
        if self.strategy != "paragraphs":
            raise ValueError(f"unknown chunking strategy {self.strategy!r} (known: paragraphs)")

    def to_json(self) -> dict[str, str | int]:
        """The configuration as JSON, for fingerprints."""
        return {"strategy": self.strategy, "max_bytes": self.max_bytes}


@dataclass(frozen=True)
class Chunk:
    """A byte range of a document.

    Attributes:
        document: the document's corpus path.
        index: the chunk's position in its document (0-based).
        start: first byte offset in the document.
        end: one past the last byte offset in the document.
        data: ``document.data[start:end]``.
    """

    document: str
    index: int
    start: int
    end: int
    data: bytes

    @property
    def chunk_id(self) -> str:
        """``<document>#<start>-<end>``: stable for a document and a configuration."""
        return f"{self.document}#{self.start}-{self.end}"


def _char_boundary(data: bytes, pos: int) -> int:
    while pos > 0 and (data[pos] & 0xC0) == 0x80:
        pos -= 1
    return pos


def _pieces(data: bytes, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Split ``data[start:end]`` into pieces of at most ``limit`` bytes at line ends."""
    pieces: list[tuple[int, int]] = []
    while end - start > limit:
        cut = data.rfind(b"\n", start, start + limit)
        if cut <= start:
            cut = _char_boundary(data, start + limit)
            if cut <= start:
                cut = start + limit
        else:
            cut += 1
        pieces.append((start, cut))
        start = cut
        while start < end and data[start : start + 1].isspace():
            start += 1
    if start < end:
        pieces.append((start, end))
    return pieces


def chunk_document(document: Document, config: ChunkConfig) -> list[Chunk]:
    """Cut one document into chunks (see the module docstring)."""
    data = document.data
    limit = config.max_bytes
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for match in _PARAGRAPH.finditer(data):
        for piece in _pieces(data, match.start(), match.end(), limit):
            if current is not None and piece[1] - current[0] <= limit:
                current = (current[0], piece[1])
            else:
                if current is not None:
                    spans.append(current)
                current = piece
    if current is not None:
        spans.append(current)
    return [
        Chunk(document.path, index, start, end, data[start:end])
        for index, (start, end) in enumerate(spans)
    ]


def chunk_corpus(corpus: Corpus, config: ChunkConfig) -> list[Chunk]:
    """Every chunk of every document, in document order then offset order."""
    chunks: list[Chunk] = []
    for document in corpus.documents:
        chunks.extend(chunk_document(document, config))
    return chunks
