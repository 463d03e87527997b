"""``sample-fts``: the built-in FTS5 retriever under another name, from a plugin factory."""

from __future__ import annotations

from typing import Any

from toolproof.evidence.corpus import Corpus
from toolproof.sources.retrieval.fts5 import Fts5Retriever


def sample_fts(corpus: Corpus, options: dict[str, Any]) -> Fts5Retriever:
    """A retriever for ``corpus`` (``options``: the ``[[retrieval]]`` entry)."""
    return Fts5Retriever(corpus, name="sample-fts", version="1")
