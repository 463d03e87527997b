from __future__ import annotations

import threading
from pathlib import Path

from toolproof.bundle.trace import ParsedLines, TraceWriter, read_trace
from toolproof.contract.trace import StepFinished, StepStarted
from toolproof.identity import digest
from toolproof.verify.view import RunView


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


def test_parsed_lines_stand_for_a_line_only_with_its_digest(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "trace.jsonl")
    writer.emit(StepStarted, step="a", kind="call")
    writer.emit(StepFinished, step="a", status="ok")
    writer.close()
    lines, _ = read_trace((tmp_path / "trace.jsonl").read_bytes())
    parsed = ParsedLines.of(lines)
    assert parsed.event(1, lines[1].digest) is lines[1].event
    assert parsed.event(1, lines[0].digest) is None  # another line's bytes
    assert parsed.event(2, lines[1].digest) is None  # past the parsed lines


def test_a_view_takes_parsed_events_for_the_same_bytes_and_parses_changed_ones(
    tmp_path: Path,
) -> None:
    """RunView(parsed=): the same bytes are not parsed again; changed bytes are judged anew."""
    writer = TraceWriter(tmp_path / "trace.jsonl")
    writer.emit(StepStarted, step="a", kind="call")
    writer.emit(StepFinished, step="a", status="ok")
    writer.close()
    data = (tmp_path / "trace.jsonl").read_bytes()
    lines, _ = read_trace(data)
    parsed = ParsedLines.of(lines)
    events = RunView(tmp_path, parsed=parsed).events
    assert events is not None
    assert [event is line.event for event, line in zip(events, lines, strict=True)] == [True, True]
    first, second = data.splitlines()
    spaced = second.replace(b'"idx":1', b'"idx": 1')
    (tmp_path / "trace.jsonl").write_bytes(first + b"\n" + spaced + b"\n")
    view = RunView(tmp_path, parsed=parsed)
    assert view.events is None
    assert view.problems["trace.jsonl"] == (
        f"trace.jsonl line 2 (byte offset {len(first) + 1}) is not in canonical JSON form "
        "(RFC 8785) or holds unknown content"
    )
