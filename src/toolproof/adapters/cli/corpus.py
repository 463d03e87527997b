"""``toolproof corpus``: write and inspect corpora."""

from __future__ import annotations

from pathlib import Path

import typer

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    ToolproofGroup,
    docs_epilog,
    emit_json,
    out_console,
)
from toolproof.adapters.cli.options import JsonOption

__all__ = ["corpus_app", "register"]

corpus_app = typer.Typer(
    cls=ToolproofGroup,
    help="Write and inspect document corpora.",
    epilog=docs_epilog("retrieval.md"),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``corpus`` command group to ``app``."""
    app.add_typer(corpus_app, name="corpus")


@corpus_app.command("python-docs", cls=ToolproofCommand, epilog=docs_epilog("retrieval.md"))
def python_docs(
    directory: Path = typer.Argument(..., help="Folder to write the topic files into."),
    as_json: bool = JsonOption,
) -> None:
    """Write the Python language reference topics (pydoc_data.topics) as text files."""
    from toolproof.evidence.corpus import load_corpus, write_python_docs

    files = write_python_docs(directory)
    corpus = load_corpus(directory)
    if as_json:
        emit_json({"directory": str(directory), "documents": len(files), "digest": corpus.digest})
        return
    out_console.print(f"wrote {len(files)} documents to {directory} (corpus {corpus.digest})")


@corpus_app.command("info", cls=ToolproofCommand, epilog=docs_epilog("retrieval.md"))
def info(
    directory: Path = typer.Argument(..., help="The corpus folder."),
    as_json: bool = JsonOption,
) -> None:
    """Print a corpus's digest and its documents' pins (path, size, digest)."""
    from toolproof.evidence.corpus import load_corpus

    corpus = load_corpus(directory)
    if as_json:
        emit_json({"digest": corpus.digest, "documents": corpus.pins()})
        return
    total = sum(len(doc.data) for doc in corpus.documents)
    out_console.print(f"{len(corpus.documents)} documents, {total} bytes, corpus {corpus.digest}")
