"""``sample-fts``: the built-in FTS5 runtime under another name, from a plugin factory."""

from __future__ import annotations

from typing import Any

from toolproof.evidence.corpus import Corpus
from toolproof.sources.retrieval.runtime import RetrievalRuntime


def sample_fts(corpus: Corpus, options: dict[str, Any]) -> RetrievalRuntime:
    """A retrieval runtime for ``corpus`` (``options``: the ``[[retrieval]]`` entry)."""
    return RetrievalRuntime(corpus, name="sample-fts", version="1")
