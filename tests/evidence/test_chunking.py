import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolproof.evidence.chunking import ChunkConfig, chunk_document
from toolproof.evidence.corpus import Document
from toolproof.identity import digest


def doc(data: bytes) -> Document:
    return Document("d.txt", "text/plain", data, digest(data), digest(data))


def test_paragraphs_are_packed_up_to_max_bytes_with_document_offsets() -> None:
    data = b"para one line.\n\n" + b"para two.\nmore two.\n\n\n" + b"x" * 70 + b"\n"
    chunks = chunk_document(doc(data), ChunkConfig(max_bytes=64))
    assert [(c.start, c.end) for c in chunks] == [(0, 35), (38, 102), (102, 108)]
    assert all(c.data == data[c.start : c.end] for c in chunks)
    assert chunks[0].chunk_id == "d.txt#0-35"


def test_a_chunk_never_cuts_a_utf8_character() -> None:
    data = ("é" * 100).encode("utf-8")
    chunks = chunk_document(doc(data), ChunkConfig(max_bytes=65))
    assert [len(c.data) for c in chunks] == [64, 64, 64, 8]
    assert b"".join(c.data for c in chunks).decode("utf-8") == "é" * 100


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk max_bytes must be >= 64, got 10"):
        ChunkConfig(max_bytes=10)
    with pytest.raises(ValueError, match="unknown chunking strategy 'words'"):
        ChunkConfig(strategy="words")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab é\n.€😀"), max_size=600), st.integers(64, 200))
def test_chunks_are_exact_ordered_disjoint_slices(text: str, limit: int) -> None:
    data = text.encode("utf-8")
    chunks = chunk_document(doc(data), ChunkConfig(max_bytes=limit))
    previous_end = 0
    for chunk in chunks:
        assert chunk.data == data[chunk.start : chunk.end]
        assert 0 < len(chunk.data) <= limit
        assert chunk.start >= previous_end
        chunk.data.decode("utf-8")
        previous_end = chunk.end
    covered = b"".join(c.data for c in chunks)
    assert covered.split() == data.split() or b"".join(covered.split()) == b"".join(data.split())
