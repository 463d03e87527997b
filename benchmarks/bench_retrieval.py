"""Retrieval benchmark: index build and query time over the bundled corpus vs rank_bm25,
and a whole `toolproof run` over a large corpus with its peak memory.

One command::

    python benchmarks/bench_retrieval.py [--queries N] [--big-mb MB]

Part 1, same run, same chunks: building toolproof's SQLite FTS5 index over the
bundled Python-docs corpus vs building ``rank_bm25.BM25Okapi`` over the same chunks
(tokenized the same way), then the median time of a top-5 query for each (ratios
printed; rank_bm25 is the anchor).

Part 2: a corpus of ``--big-mb`` megabytes (default 100) made of the bundled topics,
each copy with its own marker words, answered by ``toolproof run`` in a child
process; prints wall seconds and the child's peak RSS (target: under 2 GiB).
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolproof.evidence.chunking import ChunkConfig
from toolproof.evidence.corpus import load_corpus, write_python_docs
from toolproof.evidence.terms import query_terms
from toolproof.sources.retrieval.fts5 import Fts5Retriever

QUERIES = [
    "What does the nonlocal statement do?",
    "When is the finally clause of a try statement executed?",
    "What do __slots__ allow a class to declare?",
    "How are keyword arguments matched to parameters?",
    "What does the with statement guarantee?",
]

SPEC = """task = "benchmark"
toolset = "toolproof.toml"
[reasoner]
name = "extractive"
min_supports = 2
[[steps]]
id = "q1"
kind = "retrieve"
params = {{ query = "{query}", top_k = 5 }}
"""


def part_one(queries: int) -> None:
    from rank_bm25 import BM25Okapi

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        write_python_docs(folder)
        corpus = load_corpus(folder)
        retriever = Fts5Retriever(corpus, chunking=ChunkConfig(), cache_dir=Path(tmp) / "cache")
        chunks = retriever.chunks

        started = time.perf_counter()
        retriever.search("warm up the index", 1)  # builds the index file
        ours_build = time.perf_counter() - started

        started = time.perf_counter()
        tokenized = [re.findall(r"[^\W_]+", c.data.decode("utf-8").lower()) for c in chunks]
        bm25 = BM25Okapi(tokenized)
        theirs_build = time.perf_counter() - started

        ours, theirs = [], []
        for index in range(queries):
            query = QUERIES[index % len(QUERIES)]
            started = time.perf_counter()
            retriever.search(query, 5)
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            scores = bm25.get_scores(query_terms(query))
            sorted(range(len(scores)), key=lambda i: -scores[i])[:5]
            theirs.append(time.perf_counter() - started)
        retriever.close()
    ours_q, theirs_q = statistics.median(ours), statistics.median(theirs)
    print(f"bundled corpus: {len(corpus.documents)} documents, {len(chunks)} chunks")
    print(
        f"index build: toolproof FTS5 {ours_build * 1e3:8.2f} ms | rank_bm25 "
        f"{theirs_build * 1e3:8.2f} ms | ratio {ours_build / theirs_build:5.2f}x"
    )
    print(
        f"query (median of {queries}): toolproof {ours_q * 1e6:8.1f} us | rank_bm25 "
        f"{theirs_q * 1e6:8.1f} us | ratio {ours_q / theirs_q:5.2f}x"
    )


def part_two(megabytes: int) -> None:
    from pydoc_data.topics import topics

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        corpus.mkdir()
        written, copy = 0, 0
        target = megabytes * 1024 * 1024
        while written < target:
            for name, text in sorted(topics.items()):
                data = f"Copy {copy} marker word{copy}.\n\n{text}".encode()
                (corpus / f"{name}-{copy:05d}.txt").write_bytes(data)
                written += len(data)
                if written >= target:
                    break
            copy += 1
        (work / "toolproof.toml").write_text(
            '[[retrieval]]\ncorpus = "corpus"\ncache = "cache"\n', encoding="utf-8"
        )
        (work / "spec.toml").write_text(SPEC.format(query=QUERIES[0]), encoding="utf-8")
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "toolproof", "run", "spec.toml", "--root", ".", "--json"],
            cwd=work,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    status = "ok" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-300:]}"
    print(
        f"run over a {written / 1e6:.0f} MB corpus ({status}): {seconds:.1f} s, "
        f"peak RSS {peak_kib / 1024:.0f} MiB (limit 2048 MiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--big-mb", type=int, default=100)
    args = parser.parse_args()
    part_one(args.queries)
    if args.big_mb > 0:
        part_two(args.big_mb)


if __name__ == "__main__":
    main()
