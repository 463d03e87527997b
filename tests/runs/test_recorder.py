"""The one recorder: its lines equal the validated models', its durability holds a kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolproof import Tool
from toolproof.bundle import durable
from toolproof.bundle.pack import read_pack
from toolproof.bundle.trace import TraceWriter, read_trace
from toolproof.contract.evidence import (
    Claim,
    ClaimStatus,
    ClaimType,
    EvidenceRecord,
    EvidenceSource,
)
from toolproof.contract.tools import ToolCall, ToolFailure, ToolResult
from toolproof.contract.trace import (
    ClaimEmitted,
    EvidenceRegistered,
    FailureObserved,
    ModelTurn,
    RunFailed,
    StepFinished,
    StepStarted,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import ToolCallError
from toolproof.evidence.encoding import encode_value
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import canonical_json, digest
from toolproof.runs.live import LiveRecording, open_recording
from toolproof.runs.recorded import returned
from toolproof.runs.recorder import Durability, Recorder, call_json
from toolproof.tools.idempotency import idempotency_key
from toolproof.tools.observe import Observed, note_failure, note_recovery, observe
from toolproof.tools.toolset import Toolset


def _events(tmp: Path) -> list[tuple[type[Any], dict[str, Any]]]:
    call = ToolCall(tool="t", arguments={"q": "é", "n": [1, 2.5, None]}, step="s")
    failure = ToolFailure(kind="tool_error", message="boom", retryable=True)
    record = EvidenceRecord.model_validate(
        EvidenceStore(tmp).put(b"bytes", media_type="text/plain", kind="chunk", step="s")
    )
    claim = Claim(
        statement="x",
        type=ClaimType.ASSUMED,
        status=ClaimStatus.UNVALIDATED,
        reasoner="spec",
        reason="r",
    )
    return [
        (StepStarted, {"step": "s", "kind": "call"}),
        (ToolCalled, {"step": "s", "call_id": call.id, "call": call}),
        (ToolReturned, {"step": "s", "call_id": call.id, "result": ToolResult.success({"a": 1})}),
        (
            ToolReturned,
            {"step": "s", "call_id": call.id, "result": ToolResult(ok=False, failure=failure)},
        ),
        (FailureObserved, {"step": "s", "call_id": call.id, "failure": failure}),
        (
            FailureObserved,
            {"step": "s", "call_id": call.id, "failure": failure, "recovered_by": "retry"},
        ),
        (EvidenceRegistered, {"step": "s", "evidence": record}),
        (ClaimEmitted, {"step": "derive", "claim": claim}),
        (StepFinished, {"step": "s", "status": "ok"}),
        (StepFinished, {"step": "s", "status": "failed", "detail": {"reason": "x", "n": 1.5}}),
        (RunFailed, {"step": "s", "reason": "budget", "message": "m"}),
        (
            ModelTurn,
            {
                "step": "turn-00000001",
                "source": "http",
                "model": "POST http://127.0.0.1/v1/chat/completions",
                "request": record.id,
                "response": record.id,
                "key": record.digest,
                "detail": {"status": 200, "response_headers": {"content-type": "text/plain"}},
            },
        ),
        (
            ModelTurn,
            {
                "step": "turn-00000002",
                "source": "pydantic-ai",
                "model": "m",
                "request": record.id,
                "response": record.id,
                "key": record.digest,
            },
        ),
    ]


def test_every_event_kind_is_written_exactly_as_its_validated_model(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    events = _events(tmp_path / "a")
    checked = TraceWriter(tmp_path / "a" / "trace.jsonl")
    recorder = Recorder(tmp_path / "b")
    for cls, fields in events:
        checked.emit(cls, **fields)
        recorder.emit(cls, **fields)
    checked.close()
    recorder.close()
    fast = (tmp_path / "b" / "trace.jsonl").read_bytes()
    assert fast == (tmp_path / "a" / "trace.jsonl").read_bytes()
    lines, problem = read_trace(fast)
    assert problem is None and [line.problem for line in lines] == [None] * len(events)


def test_a_plain_call_is_the_models_json_with_its_id() -> None:
    arguments = {"text": "héllo", "nested": {"b": [1, {"c": None}], "a": True}}
    model = ToolCall(tool="echo", arguments=arguments, step="call-00000007")
    assert call_json("echo", arguments, "call-00000007") == model.to_json()
    copied = call_json("echo", arguments, "call-00000007", copy=True)
    assert copied == model.to_json()
    assert copied["arguments"]["nested"] is not arguments["nested"]


def test_the_stores_records_equal_validated_ones(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path)
    record = store.put(
        b'{"a":1}', media_type="application/json", kind="tool_result", step="s", call="call_x"
    )
    again = store.put(
        b'{"a":1}', media_type="application/json", kind="tool_result", step="s2", call="call_y"
    )
    validated = EvidenceRecord(
        id=record["id"],
        digest=digest(b'{"a":1}'),
        size=7,
        media_type="application/json",
        path=record["path"],
        source=EvidenceSource(kind="tool_result", step="s", call="call_x"),
    )
    assert record == validated.to_json()
    assert again["source"]["step"] == "s2"


def test_flush_hands_lines_to_the_os_before_close(tmp_path: Path) -> None:
    writer = TraceWriter(tmp_path / "trace.jsonl", buffer_bytes=0)
    writer.emit(StepStarted, step="a", kind="call")
    assert (tmp_path / "trace.jsonl").read_bytes() == b""
    writer.flush()
    assert (tmp_path / "trace.jsonl").read_bytes().count(b"\n") == 1
    writer.close()


def test_a_session_call_step_is_the_executors_call_step(tmp_path: Path) -> None:
    """The grammar a session writes: step_started, the block, step_finished."""
    recorder = Recorder(tmp_path, durability=Durability.EACH)
    call = call_json("t", {"x": 1}, "call-00000001")
    failure = ToolFailure(kind="tool_error", message="first", retryable=True)

    async def retried() -> ToolResult:  # what a retry layer reports, then its value
        note_failure(failure)
        note_recovery(failure, "retry")
        return ToolResult.success("ok")

    observed = asyncio.run(observe(retried()))
    assert observed.failures == ((failure, "retry"),)
    recorded = recorder.call_step("call-00000001", call, observed)
    recorder.commit()
    recorder.close()
    events = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_bytes().splitlines()]
    assert [e["type"] for e in events] == [
        "step_started",
        "tool_called",
        "tool_returned",
        "failure_observed",
        "evidence_registered",
        "step_finished",
    ]
    assert events[3]["recovered_by"] == "retry"
    assert recorded.evidence is not None
    assert events[5]["detail"] == {"evidence": recorded.evidence.id}
    # a live session's bytes are in its evidence pack (finalize writes the run's pack)
    assert recorder.store.read(recorded.evidence.id) == b"ok"
    assert not (tmp_path / recorded.evidence.path).exists()


def test_a_value_with_no_canonical_form_is_recorded_as_invalid_result(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    call = call_json("t", {}, "s")
    recorded = recorder.call_block("s", call, Observed(ToolResult.success({"x": float("nan")})))
    recorder.close()
    assert recorded.evidence is None and recorded.result.failure is not None
    assert recorded.result.failure.kind == "invalid_result"
    assert recorded.result.failure.message.startswith(
        "tool 't' returned a value with no canonical JSON form: "
    )


_KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from toolproof.contract.tools import ToolResult
    from toolproof.runs.recorder import Durability, Recorder, call_json
    from toolproof.tools.observe import Observed

    recorder = Recorder(Path(sys.argv[1]), durability=Durability.GROUP, sync_interval=3600)
    for n in range(1, 1000000):
        step = f"call-{n:08d}"
        recorder.call_step(step, call_json("t", {"n": n}, step), Observed(ToolResult.success(n)))
        recorder.commit()
        print(n, flush=True)  # acknowledged
        if n >= 200:
            time.sleep(0.01)
    """
)


def test_group_commit_loses_nothing_acknowledged_when_the_process_is_killed(
    tmp_path: Path,
) -> None:
    """SIGKILL between two calls: every acknowledged call's block is in the trace.

    The fsync interval is an hour, so what survives is what ``commit`` wrote to the
    OS at once, not what a sync happened to flush.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    acknowledged = 0
    for line in process.stdout:
        acknowledged = int(line)
        if acknowledged == 250:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    process.stdout.close()
    lines, problem = read_trace((tmp_path / "trace.jsonl").read_bytes())
    assert problem is None
    assert all(line.problem is None for line in lines)
    finished = [line.event for line in lines if isinstance(line.event, StepFinished)]
    assert len(finished) >= acknowledged == 250
    assert len(lines) == 5 * len(finished)


@pytest.mark.parametrize("durability", [Durability.GROUP, Durability.EACH])
def test_durable_recorders_sync_what_they_wrote(tmp_path: Path, durability: Durability) -> None:
    recorder = Recorder(tmp_path, durability=durability, sync_interval=0.01)
    for n in range(1, 4):
        step = f"call-{n:08d}"
        recorder.call_step(step, call_json("t", {"n": n}, step), Observed(ToolResult.success(n)))
        recorder.commit()
    size, _ = recorder.close()
    assert size == (tmp_path / "trace.jsonl").stat().st_size
    pack = read_pack(tmp_path / "evidence.pack")
    assert (pack.problem, pack.end) == (None, (tmp_path / "evidence.pack").stat().st_size)
    assert sorted(pack.read(name) for name in pack.items) == [b"1", b"2", b"3"]
    assert not (tmp_path / "evidence").exists()
    if durability == Durability.GROUP:
        assert 1 <= recorder.syncs <= 3


def test_close_cuts_the_group_syncers_wait_short_and_syncs_what_is_left(tmp_path: Path) -> None:
    """An hour-long interval: close() wakes the syncer mid-wait instead of sitting it out.

    The first batch runs at once; the second call's mark then waits out the interval,
    which only ``stop()`` can end. The thread bound (30 s) is a hang guard, not a timing.
    """
    recorder = Recorder(tmp_path, durability=Durability.GROUP, sync_interval=3600)
    for n in (1, 2):
        step = f"call-{n:08d}"
        recorder.call_step(step, call_json("t", {"n": n}, step), Observed(ToolResult.success(n)))
        recorder.commit()
        deadline = time.monotonic() + 30
        while n == 1 and recorder.syncs < 1 and time.monotonic() < deadline:
            time.sleep(0.001)  # the first batch: the syncer then waits out its interval
    closer = threading.Thread(target=recorder.close)
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    assert recorder.syncs == 2  # the first batch, then the one stop() cut short
    lines, problem = read_trace((tmp_path / "trace.jsonl").read_bytes())
    assert (problem, len(lines)) == (None, 10)


@pytest.mark.parametrize("has_syncfs", [True, False])
def test_a_group_batch_is_one_syncfs_or_else_an_fsync_of_the_pack_and_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, has_syncfs: bool
) -> None:
    """No evidence file is ever fsynced: a batch covers the pack (watched calls; real ones run)."""
    fsynced: list[str] = []
    whole: list[str] = []
    real_fsync, real_syncfs = os.fsync, durable._SYNCFS

    def fsync(fd: int) -> None:
        fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def syncfs(fd: int) -> None:
        whole.append(os.readlink(f"/proc/self/fd/{fd}"))
        if real_syncfs is not None:
            real_syncfs(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(durable, "_SYNCFS", syncfs if has_syncfs else None)
    recorder = Recorder(tmp_path, durability=Durability.GROUP, sync_interval=0.01)
    for n in range(1, 4):
        step = f"call-{n:08d}"
        recorder.call_step(step, call_json("t", {"n": n}, step), Observed(ToolResult.success(n)))
        recorder.commit()
    recorder.sync_now()  # besides the background batches, whenever they ran
    root = tmp_path.resolve()
    pack, trace = str(root / "evidence.pack"), str(root / "trace.jsonl")
    if has_syncfs:
        assert (fsynced, set(whole)) == ([], {trace})
        assert len(whole) >= 1
    else:
        assert whole == []
        assert set(fsynced) == {pack, str(root), trace}  # the folder once, for the pack's name
    recorder.close()  # stops the syncer (its last batch may run now), then fsyncs
    if has_syncfs:  # the pack was never fsynced by itself: close does (and its folder, once)
        assert fsynced == [pack, str(root), trace]
    else:  # nothing was appended since the batch: only the trace
        assert fsynced[-1] == trace and fsynced.count(str(root)) == 1


def _echo_session(tmp: Path) -> LiveRecording:
    async def echo(n: int) -> int:
        """Return n (never called: admission does not validate arguments)."""
        return n

    toolset = Toolset()
    toolset.add(Tool.from_function(echo, name="echo"))
    return open_recording(tmp, toolset.seal(), durability=Durability.EACH)


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": "héllo", "n": 2**60, "ok": True, "none": None},  # flat: copied, no walk
        {"x": 1.0, "nested": {"b": [1, {"c": "d"}]}},  # a float, a container: parsed back
    ],
)
def test_an_admitted_call_is_recorded_as_admitted_whatever_the_body_does(
    tmp_path: Path, arguments: dict[str, Any]
) -> None:
    session = _echo_session(tmp_path)
    given = json.loads(json.dumps(arguments))
    admission = session.admit("echo", given)
    expected = call_json("echo", json.loads(json.dumps(arguments)), "call-00000001")
    assert admission.call_id == expected["id"] == ToolCall.model_validate(expected).id
    if "nested" in given:  # the caller (or the body) mutates its own arguments
        given["nested"]["b"].append("late")
    given.clear()
    recorded = session.record(admission, Observed(ToolResult.success("done")))
    session.close()
    assert recorded.call_json == expected and recorded.call_id == expected["id"]
    lines = (session.directory / "trace.jsonl").read_bytes().splitlines()
    called = json.loads(lines[1])
    assert called["call"] == expected
    digest_ = digest(canonical_json(arguments))  # the key names the session and the call
    fingerprint = session.keys.fingerprints["echo"]
    key = idempotency_key(session.directory.name, "echo", fingerprint, digest_, 1)
    assert called["idempotency_key"] == admission.idempotency_key == key
    assert lines[1] == canonical_json(
        ToolCalled(
            idx=1,
            prev=digest(lines[0]),
            step="call-00000001",
            call_id=expected["id"],
            call=ToolCall.model_validate(expected),
            idempotency_key=admission.idempotency_key,
        ).to_json()
    )


def test_a_ref_in_flat_arguments_is_still_refused(tmp_path: Path) -> None:
    session = _echo_session(tmp_path)
    with pytest.raises(ToolCallError, match=r'its arguments hold a \{"\$ref": \.\.\.\} object'):
        session.admit("echo", {"$ref": "steps.a.value"})
    with pytest.raises(ToolCallError, match="malformed"):
        session.admit("echo", {"$ref": 1})
    session.close()


@pytest.mark.parametrize(
    "value",
    [{"n": 1, "square": 1}, "é\u2028", "", 2**70, -0.0, 1e21, [None, True, {"ß": [[]]}], None],
)
def test_a_success_with_evidence_bytes_is_returned_as_the_plain_json_its_model_dumps(
    value: Any,
) -> None:
    result = ToolResult.success(value)
    _, media_type = encode_value(value)
    plain = returned(result, media_type)
    assert type(plain) is dict
    assert plain == result.to_json()
    assert canonical_json(plain) == canonical_json(result.to_json())


def test_a_failure_or_a_value_without_evidence_bytes_is_returned_as_the_model() -> None:
    failed = ToolResult.fail("tool_error", "boom")
    assert returned(failed, "") is failed
    unencoded = ToolResult.success({"t": (1, 2)})  # encode_value refused it: no media type
    assert returned(unencoded, "") is unencoded
