import os
from pathlib import Path

import pytest

from toolproof.errors import InputError
from toolproof.evidence.corpus import html_to_text, load_corpus, write_python_docs
from toolproof.identity import digest


def test_python_docs_are_written_as_exact_topic_text(tmp_path: Path) -> None:
    from pydoc_data.topics import topics

    files = write_python_docs(tmp_path)
    assert sorted(f.name for f in files) == sorted(f"{name}.txt" for name in topics)
    assert (tmp_path / "nonlocal.txt").read_bytes() == topics["nonlocal"].encode("utf-8")


def test_corpus_pins_every_document_by_digest(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_bytes(b"# B\n\nbee text.\n")
    (tmp_path / "a.txt").write_bytes(b"alpha text.\n")
    (tmp_path / ".hidden.txt").write_bytes(b"never read\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    corpus = load_corpus(tmp_path)
    assert corpus.pins() == [
        {
            "path": "a.txt",
            "media_type": "text/plain",
            "size": 12,
            "digest": digest(b"alpha text.\n"),
            "source_digest": digest(b"alpha text.\n"),
        },
        {
            "path": "b.md",
            "media_type": "text/markdown",
            "size": 15,
            "digest": digest(b"# B\n\nbee text.\n"),
            "source_digest": digest(b"# B\n\nbee text.\n"),
        },
    ]


def test_corpus_digest_changes_with_any_document(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"one\n")
    first = load_corpus(tmp_path).digest
    (tmp_path / "a.txt").write_bytes(b"two\n")
    assert load_corpus(tmp_path).digest != first


def test_html_is_reduced_to_text_and_the_text_is_what_is_pinned(tmp_path: Path) -> None:
    page = (
        b"<html><head><style>p{}</style><script>x=1</script></head><body><h1>Title</h1>"
        b"<p>First para.</p><p>Second <b>bold</b> para.</p></body></html>"
    )
    (tmp_path / "p.html").write_bytes(page)
    document = load_corpus(tmp_path).documents[0]
    assert document.data == b"Title\nFirst para.\nSecond\nbold\npara.\n"
    assert html_to_text(page) == document.data
    assert document.digest == digest(document.data)
    assert document.source_digest == digest(page)
    assert document.media_type == "text/html"


def test_non_utf8_document_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(InputError, match=r"corpus document bad.txt is not UTF-8 text \(byte 3\)"):
        load_corpus(tmp_path)


def test_empty_or_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"holds no \.txt, \.md, \.rst or \.html document"):
        load_corpus(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        load_corpus(tmp_path / "nope")


def test_a_fifo_or_socket_in_a_corpus_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import socket

    (tmp_path / "a.txt").write_bytes(b"alpha text.\n")
    os.mkfifo(tmp_path / "pipe.txt")  # opening it for reading would block until a writer came
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "sock.md"))
    try:
        with caplog.at_level(logging.WARNING, logger="toolproof.corpus"):
            corpus = load_corpus(tmp_path)
    finally:
        sock.close()
    assert [doc.path for doc in corpus.documents] == ["a.txt"]
    assert [r.getMessage() for r in caplog.records] == [
        f"corpus: skipped {tmp_path / 'pipe.txt'}: not a regular file (a FIFO)",
        f"corpus: skipped {tmp_path / 'sock.md'}: not a regular file (a socket)",
    ]


def test_a_symlink_to_a_fifo_inside_the_corpus_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"alpha text.\n")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link.txt").symlink_to(tmp_path / "pipe")
    assert [doc.path for doc in load_corpus(tmp_path).documents] == ["a.txt"]
