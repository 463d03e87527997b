import asyncio
from pathlib import Path

import pytest

from toolproof.errors import InputError
from toolproof.evidence.chunking import ChunkConfig
from toolproof.evidence.corpus import load_corpus, write_python_docs
from toolproof.evidence.terms import query_terms
from toolproof.identity import digest
from toolproof.sources.retrieval.fts5 import Fts5Retriever, IndexConfig


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("python-docs")
    write_python_docs(folder)
    return folder


def test_query_terms_drop_stopwords_and_keep_order() -> None:
    assert query_terms("What does the __slots__ attribute do, and what does it DO?") == [
        "slots",
        "attribute",
    ]


def test_search_ranks_the_nonlocal_topic_first(docs: Path, tmp_path: Path) -> None:
    retriever = Fts5Retriever(load_corpus(docs), cache_dir=tmp_path)
    hits = retriever.search("What does the nonlocal statement do?", top_k=3)
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].chunk.document == "nonlocal.txt"
    assert hits[0].score > hits[1].score >= hits[2].score > 0
    assert (
        hits[0].chunk.data
        == (docs / "nonlocal.txt").read_bytes()[hits[0].chunk.start : hits[0].chunk.end]
    )


def test_results_are_deterministic_and_the_index_is_cached(docs: Path, tmp_path: Path) -> None:
    corpus = load_corpus(docs)
    first = Fts5Retriever(corpus, cache_dir=tmp_path)
    hits = [h.to_json() for h in first.search("finally clause executed", 5)]
    path = first.index_path()
    first.close()
    built = path.stat().st_mtime_ns
    second = Fts5Retriever(corpus, cache_dir=tmp_path)
    assert [h.to_json() for h in second.search("finally clause executed", 5)] == hits
    assert second.index_path() == path and path.stat().st_mtime_ns == built
    assert len(list(tmp_path.iterdir())) == 1


def test_configuration_is_in_the_fingerprint(docs: Path, tmp_path: Path) -> None:
    corpus = load_corpus(docs)
    base = Fts5Retriever(corpus, cache_dir=tmp_path).fingerprint
    assert Fts5Retriever(corpus, chunking=ChunkConfig(max_bytes=800)).fingerprint != base
    assert Fts5Retriever(corpus, index=IndexConfig(tokenizer="unicode61")).fingerprint != base


def test_a_query_without_content_words_finds_nothing(docs: Path, tmp_path: Path) -> None:
    retriever = Fts5Retriever(load_corpus(docs), cache_dir=tmp_path)
    assert retriever.search("what is the", 5) == []
    with pytest.raises(InputError, match="top_k must be between 1 and 100, got 0"):
        retriever.search("nonlocal", 0)


def test_fts_syntax_in_a_query_is_only_text(docs: Path, tmp_path: Path) -> None:
    retriever = Fts5Retriever(load_corpus(docs), cache_dir=tmp_path)
    assert retriever.search('nonlocal" OR NEAR(x', 1)[0].chunk.document == "nonlocal.txt"


def test_retrieve_tool_validates_and_returns_hits(docs: Path, tmp_path: Path) -> None:
    tool = Fts5Retriever(load_corpus(docs), cache_dir=tmp_path).as_tool()
    bad = asyncio.run(tool.call({"query": "nonlocal", "top_k": "3"}))
    assert bad.failure is not None and bad.failure.kind == "invalid_arguments"
    result = asyncio.run(tool.call({"query": "nonlocal statement", "top_k": 2}))
    assert result.ok
    assert isinstance(result.value, dict)
    hits = result.value["hits"]
    assert isinstance(hits, list) and len(hits) == 2
    first = hits[0]
    assert isinstance(first, dict)
    assert (first["document"], first["rank"]) == ("nonlocal.txt", 1)
    assert first["document_digest"] == digest((docs / "nonlocal.txt").read_bytes())
    assert result.value["corpus"] == load_corpus(docs).digest
    assert result.value["chunking"] == {"strategy": "paragraphs", "max_bytes": 1500}
