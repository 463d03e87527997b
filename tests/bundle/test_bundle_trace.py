from __future__ import annotations

import threading
from pathlib import Path

from toolproof.bundle.trace import TraceWriter, read_trace
from toolproof.contract.trace import StepFinished, StepStarted
from toolproof.identity import digest


def test_writer_assigns_idx_and_chains_prev(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "trace.jsonl")
    writer.emit(StepStarted, step="a", kind="call")
    writer.emit(StepFinished, step="a", status="ok")
    size, file_digest = writer.close()
    data = (tmp_path / "trace.jsonl").read_bytes()
    assert (size, file_digest) == (len(data), digest(data))
    first, second = data.splitlines()
    assert first == (
        b'{"idx":0,"kind":"call","prev":null,"schema_version":1,"step":"a","type":"step_started"}'
    )
    lines, problem = read_trace(data)
    assert problem is None
    assert [line.event.idx for line in lines if line.event] == [0, 1]
    assert lines[1].event is not None and lines[1].event.prev == digest(first)
    assert lines[1].digest == digest(second)


def test_reader_reports_truncation_and_bad_lines() -> None:
    good = (
        b'{"idx":0,"kind":"call","prev":null,"schema_version":1,"step":"a","type":"step_started"}'
    )
    lines, problem = read_trace(good + b"\n" + b'{"idx":1}')
    assert problem == "does not end with a newline (truncated?)"
    assert lines[0].problem is None
    assert lines[1].problem is not None and lines[1].problem.startswith("not a valid trace event")


def test_reader_refuses_non_canonical_bytes() -> None:
    spaced = (
        b'{"idx": 0, "kind":"call","prev":null,"schema_version":1,"step":"a","type":"step_started"}'
    )
    (line,), _ = read_trace(spaced + b"\n")
    assert line.problem == "is not in canonical JSON form (RFC 8785) or holds unknown content"


def test_reader_refuses_unknown_event_type() -> None:
    (line,), _ = read_trace(b'{"idx":0,"step":"a","type":"party"}\n')
    assert line.event is None
    assert line.problem is not None and "type" in line.problem


def test_a_deferred_file_digest_is_the_digest_of_the_file_whoever_hashes_it(
    tmp_path: Path,
) -> None:
    """defer_hash: chunks hashed by another thread, in order, while lines are written."""
    writer = TraceWriter(tmp_path / "trace.jsonl", buffer_bytes=0, defer_hash=True)
    done = threading.Event()

    def hash_while_written() -> None:
        while not done.is_set():
            writer.hash_written()

    hasher = threading.Thread(target=hash_while_written)
    hasher.start()
    for n in range(2000):
        writer.emit(StepStarted, step=f"s{n}", kind="call")
        writer.flush()
    done.set()
    hasher.join()
    size, file_digest = writer.close()
    data = (tmp_path / "trace.jsonl").read_bytes()
    assert (size, file_digest) == (len(data), digest(data))
    assert data.count(b"\n") == 2000
