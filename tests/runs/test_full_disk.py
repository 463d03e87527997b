"""A recording that cannot be written: refused before the body runs, one line, nothing half-written.

The fault is real: a tiny tmpfs mounted for the test (``mount -t tmpfs -o size=256k``,
root only; CI runs as root) and filled until ``ENOSPC``. Where ``mount`` is not
available the tests fall back to ``RLIMIT_FSIZE`` on the toolproof process (writes
past the limit fail with ``EFBIG``, Python ignores ``SIGXFSZ``); each test's
docstring says what it asserts in either mode, and the fixture's ``mode`` says which
one ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from serve_helpers import SERVE_CONFIG, TOOLPROOF

from toolproof.adapters.server_paths import hide_server_paths


@dataclass
class SmallDisk:
    """A directory on a filesystem the test can fill: ``mode`` is ``tmpfs`` or ``rlimit``."""

    path: Path
    mode: str
    limit: int = 0

    def fill(self, leave: int = 0) -> None:
        """Fill the tmpfs until ENOSPC, then free ``leave`` bytes."""
        filler = self.path / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * 4096):
                    pass
        finally:
            os.close(fd)
        if leave:
            os.truncate(filler, max(0, filler.stat().st_size - leave))

    def free(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def preexec(self) -> Any:
        if self.mode != "rlimit":
            return None
        limit = self.limit

        def apply() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        return apply


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        yield SmallDisk(mount, "rlimit", limit=6000)
        return
    try:
        yield SmallDisk(mount, "tmpfs")
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _server(disk: SmallDisk) -> StdioServerParameters:
    return StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(SERVE_CONFIG), "--record", str(disk.path)],
    )


def test_a_served_call_that_cannot_be_recorded_is_refused_before_its_body_runs(
    small_disk: SmallDisk,
) -> None:
    """tmpfs: once the disk is full, every call is refused with a tool failure naming the
    trace and ENOSPC, and its body never ran (``flaky`` fails on the first call it
    really gets, after space came back). rlimit: skipped (the limit cannot be lifted
    from outside the server, so "space came back" cannot be shown).
    """
    if small_disk.mode == "rlimit":
        pytest.skip("needs mount(2) for a fillable filesystem; see the rlimit test")

    async def scenario() -> list[Any]:
        async with Client(_server(small_disk)) as client:
            answers = [await client.call_tool("add", {"a": 1, "b": 2})]
            small_disk.fill()
            answers += [await client.call_tool("flaky", {"key": "k"}) for _ in range(3)]
            small_disk.free()
            answers.append(await client.call_tool("flaky", {"key": "k"}))
            answers.append(await client.call_tool("flaky", {"key": "k"}))
            return answers

    answers = asyncio.run(scenario())
    assert answers[0].is_error is False
    # a client is told no absolute server path: the location's label (<tmp>/...) instead
    public = hide_server_paths(str(small_disk.path / "sessions"))
    assert not public.startswith("/")
    sessions = re.escape(public)
    for refused in answers[1:4]:
        assert refused.is_error is True
        text = refused.content[0].text
        assert re.fullmatch(
            "unrecordable: call to 'flaky' cannot be recorded: cannot write the recording at "
            f"{sessions}/[0-9T]+-[0-9]+/trace.jsonl: No space left on device \\([0-9]+ bytes "
            "free, [0-9]+ needed to record the call\\)",
            text,
        ), text
    assert answers[4].is_error is True
    assert answers[4].content[0].text == (
        "tool_error: tool 'flaky' raised ConnectionError: first call for 'k' fails"
    )
    assert (answers[5].is_error, answers[5].content[0].text) == (False, "k")
    (run,) = (small_disk.path / "runs").iterdir()
    steps = json.loads((run / "spec.json").read_bytes())["steps"]
    assert [(s["tool"], s["arguments"]) for s in steps] == [
        ("add", {"a": 1, "b": 2}),
        ("flaky", {"key": "k"}),
        ("flaky", {"key": "k"}),
    ]


def test_a_server_whose_disk_stays_full_exits_1_with_one_line_and_keeps_the_live_session(
    small_disk: SmallDisk,
) -> None:
    """tmpfs: the disk fills mid-session and stays full; calls are refused, and at the
    end the run cannot be written: one line on stderr, exit 1, the live session kept,
    nothing under ``runs/``. rlimit: skipped (a file-size limit refuses the calls but
    lets the small run files through, so the disk never "stays full").
    """
    if small_disk.mode == "rlimit":
        pytest.skip("needs mount(2) for a filesystem that stays full")
    env = dict(os.environ)
    process = subprocess.Popen(
        [TOOLPROOF[0], *_server(small_disk).args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=small_disk.preexec(),
    )
    assert process.stdin is not None and process.stdout is not None
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for request in requests:
        process.stdin.write(json.dumps(request).encode() + b"\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 0
    answers = []
    for n in range(1, 9):
        if n == 2 and small_disk.mode == "tmpfs":
            small_disk.fill()
        call = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x" * 400}},
        }
        process.stdin.write(json.dumps(call).encode() + b"\n")
        process.stdin.flush()
        answers.append(json.loads(process.stdout.readline()))
    _, stderr = process.communicate(timeout=60)  # closes stdin: the server finalizes
    assert all("result" in answer for answer in answers), answers  # never a JSON-RPC error
    refused = [a for a in answers if a["result"].get("isError")]
    assert refused, answers
    assert all(
        a["result"]["content"][0]["text"].startswith(
            "unrecordable: call to 'echo' cannot be recorded: cannot write the recording at "
        )
        for a in refused
    )
    errors = [line for line in stderr.decode().splitlines() if line.startswith("error:")]
    assert process.returncode == 1, stderr.decode()
    assert len(errors) == 1 and "Traceback" not in stderr.decode(), stderr.decode()
    assert not (small_disk.path / "runs").exists() or not list((small_disk.path / "runs").iterdir())
    (live,) = (small_disk.path / "sessions").iterdir()
    assert (live / "trace.jsonl").is_file()
    assert not [p for p in small_disk.path.iterdir() if p.name.startswith(".tmp-run-")]


TOOLS = '''
import toolproof


@toolproof.tool(read_only=True)
def lookup(item: str) -> dict:
    """Look an item up."""
    return {"item": item, "text": item * 2000}
'''


def test_run_on_a_full_disk_exits_1_with_one_line_and_leaves_nothing_under_runs(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    """tmpfs: 8 KiB left, the run's files do not fit. rlimit: files past 6000 bytes fail.

    Either way: exit code 1, one ``error:`` line naming the error and the path, no
    traceback, no ``runs/`` and no temporary directory left in the root.
    """
    (tmp_path / "disk_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text(
        '[[python]]\nmodule = "disk_tools"\n', encoding="utf-8"
    )
    steps = "".join(
        f'[[steps]]\nid = "s{n}"\ntool = "lookup"\narguments = {{ item = "pear{n}" }}\n'
        for n in range(8)
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(f'task = "t"\n{steps}', encoding="utf-8")
    if small_disk.mode == "tmpfs":
        small_disk.fill(leave=8192)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "toolproof"),
            "run",
            str(spec),
            "--root",
            str(small_disk.path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        preexec_fn=small_disk.preexec(),
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    error = "No space left on device" if small_disk.mode == "tmpfs" else "File too large"
    assert re.fullmatch(
        f"error: run not recorded: {error}: {re.escape(str(small_disk.path))}/\\S+; "
        f"nothing was written under {re.escape(str(small_disk.path / 'runs'))}",
        lines[0],
    ), lines[0]
    left = sorted(p.name for p in small_disk.path.iterdir())
    assert left == (["filler"] if small_disk.mode == "tmpfs" else [])


def test_a_model_turn_that_cannot_be_recorded_is_refused_before_the_model_is_asked(
    small_disk: SmallDisk,
) -> None:
    """tmpfs: a turn once the disk is full raises RecordingError naming the session and
    ENOSPC, and the model is not asked; with space back, the next turn is recorded.
    rlimit: skipped (the limit cannot be lifted in this process).
    """
    if small_disk.mode == "rlimit":
        pytest.skip("needs mount(2) for a fillable filesystem")
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    import toolproof
    from toolproof import Tool, Toolset
    from toolproof.errors import RecordingError

    asked: list[int] = []

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append(len(messages))
        return ModelResponse(parts=[TextPart("It is a pear.")])

    def echo(text: str) -> str:
        """Echo."""
        return text

    toolset = Toolset()
    toolset.add(Tool.from_function(echo))
    toolset.seal()
    prompt: list[ModelMessage] = [ModelRequest.user_text_prompt("Which fruit?")]

    async def scenario() -> str:
        async with toolproof.record_session(toolset, root=small_disk.path, task="t") as session:
            model = session.pydantic_ai_model(FunctionModel(respond))
            await model.request(prompt, None, ModelRequestParameters())
            small_disk.fill()
            with pytest.raises(RecordingError) as refused:
                await model.request(prompt, None, ModelRequestParameters())
            small_disk.free()
            await model.request(prompt, None, ModelRequestParameters())
        return str(refused.value)

    message = asyncio.run(scenario())
    assert asked == [1, 1]
    sessions = re.escape(str(small_disk.path / "sessions"))
    assert re.fullmatch(
        "a pydantic-ai model turn cannot be recorded: cannot write the recording at "
        f"{sessions}/[0-9T]+-[0-9]+/trace.jsonl: No space left on device \\([0-9]+ bytes of "
        "room\\)",
        message,
    ), message
    (run,) = (small_disk.path / "runs").iterdir()
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    assert [e["step"] for e in events if e["type"] == "model_turn"] == [
        "turn-00000001",
        "turn-00000002",  # the refused turn took no number
    ]
