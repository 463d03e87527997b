"""``toolproof serve --record``: recorded sessions verify; a killed server's session recovers."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import Ran, toolproof
from mcp import Client, StdioServerParameters
from serve_helpers import SERVE_CONFIG, TOOLPROOF, free_port, spawn

from toolproof import load_toolset
from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.rundir import process_identity
from toolproof.bundle.trace import TraceWriter
from toolproof.contract.trace import TRACE_EVENT_ADAPTER, StepFinished
from toolproof.errors import InputError, ToolCallError, VerificationError
from toolproof.runs.finalize import finalize_session, recover_session
from toolproof.runs.live import open_recording
from toolproof.tools.observe import Observed
from toolproof.verify.verifier import verify_run


def _runs(root: Path) -> list[Path]:
    return sorted((root / "runs").glob("run_*"))


def _live(root: Path) -> Path:
    (live,) = sorted((root / "sessions").iterdir())
    return live


def _spec(run: Path) -> dict[str, Any]:
    return json.loads((run / "spec.json").read_bytes())


async def _calls(client: Client) -> list[Any]:
    return [
        await client.call_tool("add", {"a": 1, "b": 2}),
        await client.call_tool("add", {"a": "x"}),
        await client.call_tool("echo", {"text": "héllo"}),
        await client.call_tool("echo", {"text": {"$ref": "steps.call-1.value"}}),
        await client.call_tool("segment", {"x": 3}),
    ]


def test_a_stdio_session_is_finalized_into_a_run_that_verifies(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(SERVE_CONFIG), "--record", str(tmp_path)],
    )

    async def scenario() -> list[Any]:
        async with Client(params) as client:
            return [*await _calls(client), await client.call_tool("add", {"a": 2**63, "b": 1})]

    answers = asyncio.run(scenario())
    # an integer beyond 2**53 is recorded exactly (issue 12 item 15) and the run verifies
    assert answers[5].is_error is False
    assert answers[5].content[0].text == "9223372036854775809"
    assert answers[3].is_error is True
    assert (
        answers[3]
        .content[0]
        .text.startswith(
            "unrecordable: call to 'echo' cannot be recorded: its arguments hold a {\"$ref\": ...}"
        )
    )
    (run,) = _runs(tmp_path)
    assert list((tmp_path / "sessions").iterdir()) == []
    verification = verify_run(run)
    assert verification.ok, [str(failure) for failure in verification.failures]
    spec = _spec(run)
    assert (spec["task"], spec["policy"], spec["toolset"]) == (
        "MCP serve session",
        "audit",
        "toolproof.toml",
    )
    assert [(step["id"], step["tool"], step["arguments"]) for step in spec["steps"]] == [
        ("call-00000001", "add", {"a": 1, "b": 2}),
        ("call-00000002", "add", {"a": "x"}),
        ("call-00000003", "echo", {"text": "héllo"}),
        ("call-00000004", "segment", {"x": 3}),
        ("call-00000005", "add", {"a": 2**63, "b": 1}),
    ]
    stored = RunEvidence.open(run)
    evidence = {stored.read(name) for name in stored.names()}
    assert evidence == {
        answers[0].content[0].text.encode(),
        answers[2].content[0].text.encode(),
        answers[4].content[0].text.encode(),
        b"9223372036854775809",
    }
    required = next(r for r in verification.report.results if r.check == "required-steps")
    assert [finding.message for finding in required.findings] == [
        "step 'call-00000002' failed: invalid_arguments: invalid arguments for tool 'add': "
        'argument \'a\': "x" is not of type "integer"'
    ]


def _http_session(root: Path, stop: signal.Signals) -> subprocess.Popen[bytes]:
    port = free_port()
    args = ["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"]
    with spawn([*args, "--record", str(root)], port) as process:

        async def scenario() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await _calls(client)
                await asyncio.gather(
                    *(client.call_tool("add", {"a": i, "b": 1000}) for i in range(20))
                )

        asyncio.run(scenario())
        process.send_signal(stop)
        process.wait(30)
    return process


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_an_http_session_is_finalized_on_a_signal(tmp_path: Path, stop: signal.Signals) -> None:
    process = _http_session(tmp_path, stop)
    assert process.returncode == 0
    (run,) = _runs(tmp_path)
    assert verify_run(run).ok
    steps = _spec(run)["steps"]
    assert len(steps) == 24
    assert sorted(step["arguments"]["a"] for step in steps[4:]) == list(range(20))


def test_kill_9_leaves_a_live_session_that_never_verifies_and_recovers(tmp_path: Path) -> None:
    process = _http_session(tmp_path, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    assert _runs(tmp_path) == []
    live = _live(tmp_path)
    unverified = verify_run(live)
    assert not unverified.ok
    assert [str(failure) for failure in unverified.failures] == [
        "[manifest] manifest.json: manifest.json is missing: the run cannot be trusted"
    ]
    outcome = asyncio.run(recover_session(live))
    assert (outcome.calls, outcome.dropped) == (24, [])
    assert not live.exists()
    assert verify_run(outcome.path).ok
    assert _spec(outcome.path)["task"] == "MCP serve session (recovered after an unclean stop)"
    recovery = json.loads((outcome.path / "recovery.json").read_bytes())
    assert recovery == {"dropped": [], "kept_calls": 24, "session": live.name}


def _kill_9_session(root: Path) -> Path:
    _http_session(root, signal.SIGKILL)
    return _live(root)


def test_recovery_keeps_events_up_to_the_last_complete_call_and_reports_the_rest(
    tmp_path: Path,
) -> None:
    live = _kill_9_session(tmp_path)
    trace = live / "trace.jsonl"
    lines = trace.read_bytes().split(b"\n")[:-1]
    # The last call block is 5 events (a value); keep its first 3 and tear the 4th.
    kept, torn = lines[:-2], lines[-2][:40]
    trace.write_bytes(b"\n".join(kept) + b"\n" + torn)
    outcome = asyncio.run(recover_session(live))
    last = len(lines) - 5
    assert outcome.calls == 23
    evidence = json.loads(lines[-2])["evidence"]["path"]
    assert outcome.dropped == [
        f"trace line {len(lines) - 1}: not a valid trace event: (event): Invalid JSON: EOF "
        "while parsing a string at line 1 column 40; dropped with the 0 lines after it",
        f"event {last} (step_started of step 'call-00000024'): its call block is incomplete "
        "(the server stopped before the call was answered)",
        f"event {last + 1} (tool_called of step 'call-00000024'): its call block is incomplete "
        "(the server stopped before the call was answered)",
        f"event {last + 2} (tool_returned of step 'call-00000024'): its call block is "
        "incomplete (the server stopped before the call was answered)",
        f"{evidence}: stored for a call whose block is incomplete",
    ]
    assert verify_run(outcome.path).ok
    recovery = json.loads((outcome.path / "recovery.json").read_bytes())
    assert recovery["dropped"] == outcome.dropped


def test_a_damaged_live_trace_is_refused_by_a_clean_finalize(tmp_path: Path) -> None:
    live = _kill_9_session(tmp_path)
    with (live / "trace.jsonl").open("ab") as file:
        file.write(b'{"idx": 99')
    with pytest.raises(VerificationError, match="the live trace is damaged"):
        asyncio.run(finalize_session(live, tmp_path))
    assert _runs(tmp_path) == []


def test_recovery_refuses_a_session_whose_server_still_runs(tmp_path: Path) -> None:
    port = free_port()
    args = ["serve", "--config", str(SERVE_CONFIG), "--http", f"127.0.0.1:{port}"]
    with spawn([*args, "--record", str(tmp_path)], port) as process:
        live = _live(tmp_path)
        with pytest.raises(InputError, match=f"pid {process.pid}\\) is still running"):
            asyncio.run(recover_session(live))
    (run,) = _runs(tmp_path)
    assert verify_run(run).ok


def test_recovery_goes_on_when_the_recorders_pid_now_names_another_process(
    tmp_path: Path,
) -> None:
    """After a container restart the recorder's pid (often 1) names another process."""
    live = _kill_9_session(tmp_path)
    header_file = live / "session.json"
    header = json.loads(header_file.read_bytes())
    boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    assert header["process"].startswith(boot + "/")  # the recorder's boot and start time
    with subprocess.Popen(["sleep", "30"]) as other:  # a live process, not the recorder
        try:
            header["pid"] = other.pid
            header_file.write_text(json.dumps(header), encoding="utf-8")
            outcome = asyncio.run(recover_session(live))
        finally:
            other.kill()
    assert (outcome.calls, outcome.dropped) == (24, [])
    assert verify_run(outcome.path).ok


def test_recovery_refuses_while_the_same_recorder_process_runs(tmp_path: Path) -> None:
    live = _kill_9_session(tmp_path)
    header_file = live / "session.json"
    header = json.loads(header_file.read_bytes())
    with subprocess.Popen(["sleep", "30"]) as recorder:  # stands for the server still running
        try:
            header.update(pid=recorder.pid, process=process_identity(recorder.pid))
            header_file.write_text(json.dumps(header), encoding="utf-8")
            with pytest.raises(InputError, match=f"pid {recorder.pid}\\) is still running"):
                asyncio.run(recover_session(live))
        finally:
            recorder.kill()
    assert live.exists()


def test_recovery_refuses_a_directory_that_is_not_a_live_session(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is not a live session"):
        asyncio.run(recover_session(tmp_path))


def _toolproof(*args: str) -> Ran:
    return toolproof(*args)


def test_the_cli_refuses_a_live_session_and_recovers_it_on_request(tmp_path: Path) -> None:
    live = _kill_9_session(tmp_path)
    rel = f"sessions/{live.name}"
    plain = _toolproof("verify", rel, "--root", str(tmp_path))
    assert plain.returncode == 2
    assert "manifest.json is missing: the run cannot be trusted" in plain.stderr
    recovered = _toolproof("verify", rel, "--root", str(tmp_path), "--recover", "--json")
    assert recovered.returncode == 0, recovered.stderr
    document = json.loads(recovered.stdout)
    (run,) = _runs(tmp_path)
    assert (document["run_id"], document["kept_calls"], document["dropped"]) == (run.name, 24, [])
    assert document["verification"]["ok"] is True
    again = _toolproof("verify", run.name, "--root", str(tmp_path))
    assert (again.returncode, again.stdout.strip().splitlines()[-1]) == (0, "verified")


def test_recover_on_a_finished_run_is_an_input_error(tmp_path: Path) -> None:
    _http_session(tmp_path, signal.SIGTERM)
    (run,) = _runs(tmp_path)
    done = _toolproof("verify", run.name, "--root", str(tmp_path), "--recover")
    assert done.returncode == 1
    assert "is not a live session" in done.stderr


def test_a_server_that_cannot_listen_leaves_no_session_behind(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _toolproof(
            "serve",
            "--config",
            str(SERVE_CONFIG),
            "--http",
            f"127.0.0.1:{port}",
            "--record",
            str(tmp_path),
        )
    assert done.returncode == 1
    assert f"cannot serve on 127.0.0.1:{port}: the address is in use" in done.stderr
    assert list((tmp_path / "sessions").iterdir()) == []
    assert not (tmp_path / "runs").exists()


def test_a_live_trace_the_frozen_run_does_not_reproduce_is_not_committed(tmp_path: Path) -> None:
    async def record() -> Path:
        async with load_toolset(SERVE_CONFIG) as toolset:
            session = open_recording(tmp_path, toolset)
            for a in (1, 2):
                arguments = {"a": a}
                token = session.admit("add", arguments)
                session.record(token, Observed(await toolset["add"].call(arguments)))
            session.close()
            return session.directory

    live = asyncio.run(record())
    events = [json.loads(line) for line in (live / "trace.jsonl").read_bytes().splitlines()]
    (live / "trace.jsonl").unlink()
    writer = TraceWriter(live / "trace.jsonl")  # a chained trace the executor would not write
    for raw in events:
        event = TRACE_EVENT_ADAPTER.validate_python(raw)
        fields = event.model_dump(exclude={"idx", "prev", "type", "schema_version"})
        if isinstance(event, StepFinished) and event.step == "call-00000002":
            fields["detail"] = {**fields["detail"], "note": "edited"}
        writer.emit(type(event), **fields)
    writer.close()
    with pytest.raises(VerificationError, match="differs from the live trace at event 9"):
        asyncio.run(finalize_session(live, tmp_path))
    assert live.is_dir()
    assert not (tmp_path / "runs").exists() or _runs(tmp_path) == []


def test_a_failure_a_retry_recovered_from_is_recorded_as_observed(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(SERVE_CONFIG), "--record", str(tmp_path)],
    )

    async def scenario() -> Any:
        async with Client(params) as client:
            return await client.call_tool("flaky_retry", {"key": "k"})

    answer = asyncio.run(scenario())
    assert (answer.is_error, answer.content[0].text) == (False, "k")
    (run,) = _runs(tmp_path)
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    assert [event["type"] for event in events[:6]] == [
        "step_started",
        "tool_called",
        "tool_returned",
        "failure_observed",
        "evidence_registered",
        "step_finished",
    ]
    observed = events[3]["failure"]
    assert (observed["kind"], observed["message"], observed["retryable"]) == (
        "tool_error",
        "tool 'flaky' raised ConnectionError: first call for 'k' fails",
        False,
    )
    assert events[3]["recovered_by"] == "retry"
    assert verify_run(run).ok
    replayed = _toolproof("replay", run.name, "--root", str(tmp_path), "--json")
    assert json.loads(replayed.stdout)["identical"] is True


def test_arguments_nested_100000_deep_are_unrecordable_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]

    async def record() -> str:
        async with load_toolset(SERVE_CONFIG) as toolset:
            session = open_recording(tmp_path, toolset)
            try:
                with pytest.raises(ToolCallError) as info:
                    session.admit("add", {"a": deep})
            finally:
                session.close()
            return info.value.failure.message

    message = asyncio.run(record())
    assert message.startswith(
        "call to 'add' cannot be recorded: its arguments have no canonical JSON form"
    )
    assert message.endswith(": nested deeper than 256 levels)")
