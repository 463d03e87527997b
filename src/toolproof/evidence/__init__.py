"""Evidence: exact bytes, spans, corpora, retrieval and reasoners."""
