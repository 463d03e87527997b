"""Verify reads each byte once, in bounded memory, and refuses oversized input by rule."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from runs_support import Counter, base_spec, make_toolset, remanifest, run

from toolproof.bundle.manifest import (
    MAX_MANIFEST_BYTES,
    MAX_MANIFEST_ENTRIES,
    check_manifest,
)
from toolproof.bundle.trace import MAX_LINE_BYTES, TraceReader
from toolproof.identity import canonical_json, digest
from toolproof.verify.checks import CHECKS, check_findings
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import MAX_CLAIMS_BYTES, RunView

_DAMAGED = "; the file is damaged or not a toolproof run"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return run(tmp_path, base_spec(), make_toolset(Counter())).path


def _schema(run_dir: Path, **options: int) -> list[str]:
    return [str(f) for f in verify_run(run_dir, **options).failures if f.check == "schema"]


def test_progress_counts_every_listed_byte_once(run_dir: Path) -> None:
    seen: list[tuple[int, int]] = []
    assert verify_run(run_dir, progress=lambda count, total: seen.append((count, total))).ok
    listed = json.loads((run_dir / "manifest.json").read_bytes())["files"]
    total = sum(entry["size"] for entry in listed)
    assert {pair[1] for pair in seen} == {total}
    assert sum(count for count, _ in seen) == total  # the trace too: hashed as it is parsed


def test_a_trace_line_past_the_limit_is_refused_by_line_and_offset(run_dir: Path) -> None:
    lines = (run_dir / "trace.jsonl").read_bytes().split(b"\n")[:-1]
    limit = 300
    number = next(n for n, line in enumerate(lines) if len(line) > limit)
    offset = sum(len(line) + 1 for line in lines[:number])
    assert _schema(run_dir, max_line_bytes=limit) == [
        f"[schema] trace.jsonl: trace.jsonl line {number + 1} (byte offset {offset}) is longer "
        f"than {limit} bytes, the limit on a trace line; refused unread" + _DAMAGED
    ]
    assert MAX_LINE_BYTES == 256 * 1024 * 1024


def test_a_line_far_past_the_limit_costs_one_block_of_memory(tmp_path: Path) -> None:
    """A sparse 64 MiB one-line trace read with the limit lowered to 1 MiB (as 1 GB at 256 MiB)."""
    path = tmp_path / "trace.jsonl"
    with path.open("wb") as file:
        file.truncate(64 << 20)
    reader = TraceReader(path, max_line_bytes=1 << 20)
    tracemalloc.start()
    try:
        (line,) = list(reader.lines())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (line.position, line.offset, line.data, line.length) == (0, 0, None, 64 << 20)
    assert not reader.ends_with_newline and reader.size == 64 << 20
    assert peak < 3 << 20  # one 1 MiB block and at most 1 MiB of line, never the line


def test_a_truncated_trace_names_where_its_last_line_starts(run_dir: Path) -> None:
    trace = run_dir / "trace.jsonl"
    data = trace.read_bytes()[:-1]
    trace.write_bytes(data)
    forged = remanifest(run_dir)
    start = data.rindex(b"\n") + 1
    assert _schema(forged) == [
        "[schema] trace.jsonl: trace.jsonl does not end with a newline (truncated?): its last "
        f"line starts at byte offset {start}" + _DAMAGED
    ]


def test_a_bad_line_is_named_by_line_and_byte_offset(run_dir: Path) -> None:
    trace = run_dir / "trace.jsonl"
    lines = trace.read_bytes().split(b"\n")[:-1]
    lines[2] = lines[2].replace(b'"idx":2', b'"idx": 2')
    trace.write_bytes(b"\n".join(lines) + b"\n")
    forged = remanifest(run_dir)
    offset = len(lines[0]) + len(lines[1]) + 2
    assert _schema(forged) == [
        f"[schema] trace.jsonl: trace.jsonl line 3 (byte offset {offset}) is not in canonical "
        "JSON form (RFC 8785) or holds unknown content" + _DAMAGED
    ]


def test_a_trace_changed_after_the_manifest_fails_the_manifest_check(run_dir: Path) -> None:
    """Its size is the listed one, so it is hashed by the pass that parses it."""
    trace = run_dir / "trace.jsonl"
    data = bytearray(trace.read_bytes())
    data[10] ^= 0x01
    trace.write_bytes(bytes(data))
    listed = json.loads((run_dir / "manifest.json").read_bytes())["files"]
    (entry,) = [entry for entry in listed if entry["path"] == "trace.jsonl"]
    verification = verify_run(run_dir)
    assert verification.report is None
    assert [str(f) for f in verification.failures] == [
        f"[manifest] trace.jsonl: trace.jsonl has digest {digest(bytes(data))}, the manifest "
        f"says {entry['digest']} (its bytes were changed)"
    ]


def test_claims_past_the_entry_limit_are_refused_at_that_entry(run_dir: Path) -> None:
    claims = json.loads((run_dir / "claims.json").read_bytes())
    assert len(claims) >= 2
    view = RunView(run_dir, max_claims=1)
    assert view.claims is None
    assert view.problems["claims.json"] == (
        "claims.json holds more than 1 claims (entry 1 is past the limit); refused at that entry"
    )


def test_a_million_claims_are_refused_at_the_first_bad_one_in_bounded_memory(
    run_dir: Path,
) -> None:
    (run_dir / "claims.json").write_bytes(b"[" + b",".join([b"{}"] * 1_000_000) + b"]")
    tracemalloc.start()
    try:
        view = RunView(run_dir)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert view.problems["claims.json"] == (
        "claims.json is not a list of claims: 0.statement: Field required"
    )
    assert peak < 32 << 20


def test_claims_over_the_byte_limit_are_refused_unread(run_dir: Path) -> None:
    path = run_dir / "claims.json"
    with path.open("wb") as file:
        file.truncate(MAX_CLAIMS_BYTES + 1)
    assert RunView(run_dir).problems["claims.json"] == (
        f"claims.json is {MAX_CLAIMS_BYTES + 1} bytes, over the limit of {MAX_CLAIMS_BYTES} "
        "bytes; refused by its size, not read"
    )


def test_a_manifest_past_the_entry_limit_is_refused_at_that_entry(run_dir: Path) -> None:
    entry = {"digest": "sha256:" + "0" * 64, "path": "x", "schema_version": 1, "size": 0}
    files = [dict(entry, path=f"evidence/{n:06d}") for n in range(MAX_MANIFEST_ENTRIES + 1)]
    document = {"files": files, "run_id": "run_" + "0" * 64, "schema_version": 1}
    (run_dir / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
    _, _, findings = check_manifest(run_dir)
    assert [f.message for f in findings] == [
        f"manifest.json lists more than {MAX_MANIFEST_ENTRIES} files (entry "
        f"{MAX_MANIFEST_ENTRIES} is past the limit); refused at that entry"
    ]


def test_a_manifest_over_the_byte_limit_is_refused_unread(run_dir: Path) -> None:
    with (run_dir / "manifest.json").open("wb") as file:
        file.truncate(MAX_MANIFEST_BYTES + 1)
    assert [str(f) for f in verify_run(run_dir).failures] == [
        f"[manifest] manifest.json: manifest.json is {MAX_MANIFEST_BYTES + 1} bytes, over the "
        f"limit of {MAX_MANIFEST_BYTES} bytes; refused by its size, not read"
    ]


def test_a_truncated_evidence_pack_is_refused_by_its_size(run_dir: Path) -> None:
    path = run_dir / "evidence.pack"
    size = path.stat().st_size
    os.truncate(path, size - 1)
    assert [str(f) for f in verify_run(run_dir).failures] == [
        f"[manifest] evidence.pack: evidence.pack has size {size - 1} bytes, the manifest "
        f"says {size} (truncated, appended or replaced; refused by size, not read)"
    ]


def test_one_pass_gives_what_each_check_gives_on_its_own(run_dir: Path) -> None:
    """The streaming checks fed together find what each finds run alone."""
    lines = (run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    (run_dir / "trace.jsonl").write_bytes(b"".join(lines[:3] + lines[4:]))
    forged = remanifest(run_dir)
    together = check_findings(RunView(forged))
    alone = [check.run(RunView(forged)) for check in CHECKS]
    assert together == alone
    assert together[CHECKS.index(next(c for c in CHECKS if c.id == "trace-chain"))]


def _failures(run_dir: Path, check: str) -> list[str]:
    return [str(f) for f in verify_run(run_dir).failures if f.check == check]


def test_a_300_mb_trace_line_is_refused_in_one_line_in_bounded_memory(run_dir: Path) -> None:
    """A line past the 256 MiB limit (sparse: the test never holds it) fails verify by rule.

    The reader holds a line until it passes the limit (a line under it is an event), so
    memory is bounded by the limit, not by the line: 300 MB here, 1 GB alike.
    """
    trace = run_dir / "trace.jsonl"
    offset = trace.stat().st_size
    number = (trace.read_bytes()).count(b"\n") + 1
    with trace.open("r+b") as file:
        file.seek(offset + 300_000_000)
        file.write(b"\n")
    forged = remanifest(run_dir)  # the manifest lists the long trace: only the rule refuses it
    tracemalloc.start()
    try:
        failures = _failures(forged, "schema")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert failures == [
        f"[schema] trace.jsonl: trace.jsonl line {number} (byte offset {offset}) is longer "
        f"than {MAX_LINE_BYTES} bytes, the limit on a trace line; refused unread" + _DAMAGED
    ]
    assert peak < MAX_LINE_BYTES + (16 << 20)  # bounded by the limit, not by the line


def test_an_index_record_pointing_past_the_pack_fails_verify_in_one_line(run_dir: Path) -> None:
    index = run_dir / "evidence.idx"
    data = index.read_bytes()
    header = data.index(b"\n") + 1
    name = data[header : header + 64].decode()
    index.write_bytes(data[: header + 65] + b"%016x" % (1 << 40) + data[header + 81 :])
    pack_size = (run_dir / "evidence.pack").stat().st_size
    size = int(data[header + 82 : header + 98], 16)
    assert _failures(remanifest(run_dir), "evidence-digests") == [
        f"[evidence-digests] evidence.idx: evidence.idx at byte {header}: record 1 ({name}) "
        f"points past the end of evidence.pack (bytes [{1 << 40}, {(1 << 40) + size}) of a "
        f"{pack_size}-byte pack)"
    ]


def test_a_pack_truncated_mid_item_fails_verify_in_one_line(run_dir: Path) -> None:
    pack = run_dir / "evidence.pack"
    data = pack.read_bytes()
    header = data.index(b"\n") + 1
    name, size = (
        data[header : header + 64].decode(),
        int(data[header + 65 : data.index(b"\n", header)]),
    )
    line = data.index(b"\n", header) + 1 - header
    os.truncate(pack, header + line + size // 2)
    assert _failures(remanifest(run_dir), "evidence-digests") == [
        f"[evidence-digests] evidence.pack: evidence.pack at byte {header}: item 1 ({name}) is "
        f"torn: the file ends after {size // 2} of its {size} bytes"
    ]


async def _fetch(i: int) -> str:
    """Document ``i``: 200 distinct bytes."""
    return (f"document {i}: " + "lorem ipsum " * 20)[:200]


def _session_run(root: Path, calls: int) -> Path:
    """A recorded session of ``calls`` calls of ``_fetch``, committed as one run."""
    import asyncio

    import toolproof

    toolset = toolproof.Toolset()
    toolset.add(toolproof.Tool.from_function(_fetch))
    toolset.seal()

    async def record() -> str:
        async with toolproof.record_session(
            toolset, root=root, task="bounded", segment_calls=0
        ) as session:
            for i in range(calls):
                await session.call("_fetch", {"i": i})
        return session.run_id

    return root / "runs" / asyncio.run(record())


def test_verify_keeps_no_parsed_event_of_the_trace_once_its_checks_are_fed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 point 3: the checks keep digests of past events, never the events.

    Counted right after the one pass over the trace (every check's state fed, none
    finished yet, the view alive): of a 300-call trace (1,506 events), at most the few a
    check holds as its last (the open call, the last two for ``finalize``) are alive;
    keeping the trace, or an event per call, would be hundreds.
    """
    import gc

    from toolproof.contract.trace import EventBase

    directory = _session_run(tmp_path, 300)
    assert (directory / "trace.jsonl").read_bytes().count(b"\n") == 1506
    alive: list[int] = []
    scan = RunView.scan

    def counting(view: RunView, *args: Any, **kwargs: Any) -> None:
        scan(view, *args, **kwargs)
        gc.collect()
        alive.append(sum(isinstance(item, EventBase) for item in gc.get_objects()))

    monkeypatch.setattr(RunView, "scan", counting)
    verification = verify_run(directory)
    assert verification.ok, verification.failures
    assert len(alive) == 1  # one pass
    assert alive[0] <= 4, alive


def test_verify_reads_spec_and_plan_part_by_part_never_whole(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 point 3: the built-in checks never build the whole spec or plan model."""

    def whole(view: RunView) -> None:
        raise AssertionError("the whole spec or plan was parsed")

    monkeypatch.setattr(RunView, "spec", property(whole))
    monkeypatch.setattr(RunView, "plan", property(whole))
    verification = verify_run(run_dir)
    assert verification.ok, verification.failures


def test_a_plan_read_part_by_part_is_refused_as_the_whole_was(run_dir: Path) -> None:
    plan = json.loads((run_dir / "plan.json").read_bytes())
    spaced = (run_dir / "plan.json").read_bytes().replace(b'"edges":', b'"edges": ', 1)
    (run_dir / "plan.json").write_bytes(spaced)
    first = remanifest(run_dir)
    assert _schema(first) == [
        "[schema] plan.json: plan.json is not in canonical JSON form (RFC 8785): whitespace "
        "at character 9" + _DAMAGED
    ]
    plan["nodes"][0]["tool"] = "other"  # the content changed, its id did not
    (first / "plan.json").write_bytes(canonical_json(plan))
    second = remanifest(first)
    (problem,) = _schema(second)
    assert problem.startswith("[schema] plan.json: plan.json is not a valid Plan: ")
    assert f"{plan['id']}" in problem
    plan["nodes"][1]["depends_on"] = 3  # not a list
    (second / "plan.json").write_bytes(canonical_json(plan))
    assert _schema(remanifest(second)) == [
        "[schema] plan.json: plan.json is not a valid Plan: nodes.1.depends_on: Input should "
        "be a valid list" + _DAMAGED
    ]
