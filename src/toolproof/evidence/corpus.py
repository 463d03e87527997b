"""Corpora: folders of documents, pinned by digest, and the bundled Python docs corpus.

A :class:`Document` is the exact text bytes that will be chunked and cited. For
``.txt``, ``.md`` and ``.rst`` files those are the file's bytes; for ``.html`` and
``.htm`` files they are the page reduced to text by BeautifulSoup (``get_text`` with
newlines between blocks), and both digests are pinned: ``source_digest`` of the
file as found and ``digest`` of the text bytes that are cited. A corpus digest
covers every document's path and digests, so any change to any document changes it.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolproof.errors import InputError
from toolproof.identity import digest, digest_json

logger = logging.getLogger("toolproof.corpus")

__all__ = [
    "DOCUMENT_SUFFIXES",
    "MAX_DOCUMENT_BYTES",
    "Corpus",
    "Document",
    "html_to_text",
    "load_corpus",
    "write_python_docs",
]

DOCUMENT_SUFFIXES = {".txt": "text/plain", ".md": "text/markdown", ".rst": "text/x-rst"}
"""Suffixes read as they are, with their media types; ``.html``/``.htm`` are reduced to text."""

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
"""The largest document read, in bytes (64 MiB); a larger file is refused."""


@dataclass(frozen=True)
class Document:
    """One document of a corpus.

    Attributes:
        path: the document's relative POSIX path inside the corpus folder.
        media_type: ``text/plain``, ``text/markdown``, ``text/x-rst`` or ``text/html``.
        data: the exact UTF-8 text bytes that are chunked and cited.
        digest: ``sha256:...`` of ``data``.
        source_digest: ``sha256:...`` of the file as found (equal to ``digest`` but for HTML).
    """

    path: str
    media_type: str
    data: bytes
    digest: str
    source_digest: str


@dataclass(frozen=True)
class Corpus:
    """A pinned set of documents, sorted by path.

    Attributes:
        root: the folder it was read from (informational; never needed for replay).
        documents: the documents, sorted by path.
        digest: ``sha256:...`` over every document's path, media type and digests.
    """

    root: str
    documents: tuple[Document, ...]
    digest: str

    def pins(self) -> list[dict[str, str | int]]:
        """Every document's pin: path, media type, size in bytes, digest, source digest."""
        return [
            {
                "path": doc.path,
                "media_type": doc.media_type,
                "size": len(doc.data),
                "digest": doc.digest,
                "source_digest": doc.source_digest,
            }
            for doc in self.documents
        ]


def html_to_text(html: bytes) -> bytes:
    """Reduce an HTML page to its text with BeautifulSoup (scripts and styles dropped).

    Returns:
        UTF-8 text bytes, blocks separated by newlines, runs of blank lines folded to one.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    text = soup.get_text("\n")
    lines = [line.strip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return ("\n".join(out).strip() + "\n").encode("utf-8")


def _read_regular(file: Path) -> bytes | None:
    """The bytes of ``file`` when it is a regular file, else ``None`` (with a warning).

    A FIFO, socket or device would block or never end; it is opened without blocking
    and checked on the open descriptor, so a file swapped for one after the walk saw
    it is caught too.
    """
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if not stat.S_ISREG(os.stat(file).st_mode):  # a socket cannot be opened at all
            logger.warning("corpus: skipped %s: not a regular file (a socket)", file)
            return None
        raise InputError(
            f"corpus document {file}: cannot read it ({exc.strerror or exc})", path=str(file)
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
            logger.warning("corpus: skipped %s: not a regular file (%s)", file, kind)
            return None
        size = os.fstat(fd).st_size
        if size > MAX_DOCUMENT_BYTES:
            raise InputError(
                f"corpus document {file} is {size} bytes; the limit is {MAX_DOCUMENT_BYTES} bytes",
                path=str(file),
                rule="document size limit",
            )
        return handle.read(MAX_DOCUMENT_BYTES + 1)


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


def _read_document(folder: Path, file: Path) -> Document | None:
    suffix = file.suffix.lower()
    if suffix not in DOCUMENT_SUFFIXES and suffix not in (".html", ".htm"):
        return None
    raw = _read_regular(file)
    if raw is None:
        return None
    if len(raw) > MAX_DOCUMENT_BYTES:  # it grew while being read
        raise InputError(
            f"corpus document {file} is over the limit of {MAX_DOCUMENT_BYTES} bytes",
            path=str(file),
            rule="document size limit",
        )
    rel = PurePosixPath(file.relative_to(folder).as_posix()).as_posix()
    if suffix in (".html", ".htm"):
        data = html_to_text(raw)
        media_type = "text/html"
    else:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"corpus document {rel} is not UTF-8 text (byte {exc.start})",
                path=rel,
                rule="documents are UTF-8 text",
            ) from None
        data = raw
        media_type = DOCUMENT_SUFFIXES[suffix]
    return Document(rel, media_type, data, digest(data), digest(raw))


def load_corpus(folder: str | Path) -> Corpus:
    """Read every text, Markdown, reStructuredText and HTML file under ``folder``.

    Files are visited in sorted order; symbolic links that leave the folder and
    hidden files or folders (a leading ``.``) are skipped. A document name that is
    not a regular file (a FIFO, a socket, a device) is skipped with a warning on the
    ``toolproof.corpus`` logger: reading it would block or never end.

    Raises:
        InputError: the folder is missing, holds no document, or a document is not
            UTF-8 or is over :data:`MAX_DOCUMENT_BYTES`.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputError(
            f"corpus folder {root} does not exist (write one with `toolproof corpus python-docs "
            f"{root}` for the Python reference corpus, or put .txt/.md/.rst/.html files there)",
            path=str(root),
            rule="exists",
        )
    resolved = root.resolve()
    documents: list[Document] = []
    for dirpath, dirnames, filenames in os.walk(resolved):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            file = Path(dirpath) / name
            if not file.resolve().is_relative_to(resolved):
                continue
            document = _read_document(resolved, file)
            if document is not None:
                documents.append(document)
    if not documents:
        raise InputError(
            f"corpus folder {root} holds no .txt, .md, .rst or .html document",
            path=str(root),
            rule="a corpus has at least one document",
        )
    documents.sort(key=lambda doc: doc.path)
    corpus_digest = digest_json(
        [[doc.path, doc.media_type, doc.digest, doc.source_digest] for doc in documents]
    )
    return Corpus(str(root), tuple(documents), corpus_digest)


def write_python_docs(folder: str | Path) -> list[Path]:
    """Write the Python language reference topics that ship with CPython as text files.

    The source is ``pydoc_data.topics`` (the text ``help()`` shows); each topic becomes
    ``<topic>.txt``, UTF-8, exactly the topic's text.

    Returns:
        The files written, sorted.
    """
    from pydoc_data.topics import topics

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(topics):
        file = out / f"{name}.txt"
        file.write_bytes(topics[name].encode("utf-8"))
        written.append(file)
    return written
