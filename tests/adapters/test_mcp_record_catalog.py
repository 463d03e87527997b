"""Resource reads, prompt gets, sampling and elicitation under ``toolproof serve --record``.

The official ``mcp`` client drives ``toolproof serve --record`` over stdio, proxying
``tests/fixtures/conformance/reference_server.py`` and natively
(``tests/fixtures/conformance/native.toml``); when the client closes the server's
stdin the session becomes a run, which verifies and replays frozen. Then an agent
session quotes a resource read in its answer (``[read_1]``), and replays frozen.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from serve_helpers import free_port, spawn

from toolproof import record_session, replay_session
from toolproof.adapters.session import Session
from toolproof.bundle.evidence import RunEvidence
from toolproof.errors import ReplayRefused
from toolproof.identity import canonical_json, digest
from toolproof.runs.replay import replay_run
from toolproof.verify.provenance import check_evidence_digests
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import RunView

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"
TOOLPROOF = [sys.executable, "-c", "from toolproof.adapters.cli import main; main()"]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
TEXT = b"This is the content of the static text resource."
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "a sampled answer"}}


def proxy_config(tmp_path: Path) -> Path:
    config = tmp_path / "proxy.toml"
    config.write_text(
        f'[[mcp]]\nname = "reference"\ncommand = "{sys.executable}"\n'
        f'args = ["{FIXTURES / "reference_server.py"}"]\nprefix = ""\n'
        'protocol = "2025-11-25"\n',  # it asks with server-initiated requests (2025-11-25)
        encoding="utf-8",
    )
    return config


async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="a sampled answer"), model="m"
    )


async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"username": "ada", "email": "a@b"})


async def drive(config: Path, root: Path) -> list[str]:
    server = StdioServerParameters(
        command=TOOLPROOF[0],
        args=[*TOOLPROOF[1:], "serve", "--config", str(config), "--record", str(root)],
    )
    client = Client(
        server, sampling_callback=on_sampling, elicitation_callback=on_elicit, mode="legacy"
    )
    async with client:
        text = await client.read_resource("test://static-text")
        await client.read_resource("test://static-binary")
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        sampled = await client.call_tool("test_sampling", {"prompt": "why?"})
        elicited = await client.call_tool("test_elicitation", {"message": "who?"})
    return [
        text.contents[0].text,  # type: ignore[union-attr]
        prompt.messages[0].content.text,  # type: ignore[union-attr]
        sampled.content[0].text,  # type: ignore[union-attr]
        elicited.content[0].text,  # type: ignore[union-attr]
    ]


def events_of(run: Path) -> list[dict[str, Any]]:
    lines = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("column", ["proxy", "native"])
def test_reads_prompts_and_relayed_requests_are_recorded_verified_and_replayed(
    column: str, tmp_path: Path
) -> None:
    config = proxy_config(tmp_path) if column == "proxy" else FIXTURES / "native.toml"
    root = tmp_path / "artifacts"
    answered = asyncio.run(drive(config, root))
    assert answered == [
        TEXT.decode(),
        "Prompt with arguments: arg1='a', arg2='b'",
        "LLM response: a sampled answer",
        "User response: action=accept, content={'username': 'ada', 'email': 'a@b'}",
    ]
    [run] = (root / "runs").iterdir()
    events = events_of(run)
    steps = [(e["step"], e["kind"]) for e in events if e["type"] == "step_started"]
    assert steps[:5] == [
        ("read-00000001", "read"),
        ("read-00000002", "read"),
        ("prompt-00000001", "prompt"),
        ("call-00000001", "call"),
        ("call-00000002", "call"),
    ]
    [first, second] = [e for e in events if e["type"] == "resource_read"]
    assert (first["uri"], second["uri"]) == ("test://static-text", "test://static-binary")
    resources = [e["evidence"] for e in events if e["type"] == "evidence_registered"]
    text_record, binary_record = (r for r in resources if r["source"]["kind"] == "resource")
    # the evidence is the resource's own bytes: the text's UTF-8, the blob decoded
    assert RunEvidence.open(run).read(text_record["id"]) == TEXT
    assert (text_record["media_type"], text_record["source"]["detail"]) == (
        "text/plain",
        {"index": 0, "uri": "test://static-text"},
    )
    assert RunEvidence.open(run).read(binary_record["id"]) == PNG
    assert binary_record["media_type"] == "image/png"
    [prompt] = [e for e in events if e["type"] == "prompt_got"]
    assert (prompt["name"], prompt["arguments"]) == (
        "test_prompt_with_arguments",
        {"arg1": "a", "arg2": "b"},
    )
    [prompt_record] = [r for r in resources if r["source"]["kind"] == "prompt"]
    assert RunEvidence.open(run).read(prompt_record["id"]) == canonical_json(prompt["result"])
    sampling, elicitation = [e for e in events if e["type"] == "request_relayed"]
    assert (sampling["step"], sampling["method"]) == ("call-00000001", "sampling/createMessage")
    assert sampling["request"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "why?"}}
    ]
    assert {k: sampling["answer"][k] for k in ("role", "content")} == SAMPLED
    assert (elicitation["method"], elicitation["answer"]) == (
        "elicitation/create",
        {"action": "accept", "content": {"username": "ada", "email": "a@b"}},
    )
    relayed = [r for r in resources if r["source"]["kind"].startswith("relayed_")]
    assert [r["source"]["kind"] for r in relayed] == ["relayed_request", "relayed_answer"] * 2
    assert RunEvidence.open(run).read(relayed[1]["id"]) == canonical_json(sampling["answer"])
    verification = verify_run(run)
    assert verification.ok, verification.failures
    replayed = asyncio.run(replay_run(run))
    assert (replayed.identical, replayed.live_calls) == (True, 0)


def test_the_evidence_check_refuses_a_read_its_evidence_does_not_hold(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    asyncio.run(drive(FIXTURES / "native.toml", root))
    [run] = (root / "runs").iterdir()
    assert check_evidence_digests(RunView(run)) == []
    events = events_of(run)
    [index, _] = [i for i, e in enumerate(events) if e["type"] == "resource_read"]
    events[index]["result"]["contents"][0]["text"] = "forged"  # the read, not its bytes
    forged = "".join(canonical_json(e).decode() + "\n" for e in events)
    (run / "trace.jsonl").write_text(forged, encoding="utf-8")
    [finding] = check_evidence_digests(RunView(run)) or []
    assert finding.message == (
        f"{events[index + 1]['evidence']['path']} does not hold content item 0 of the "
        "resource read at step 'read-00000001'"
    )
    assert not verify_run(run).ok


def test_an_agent_cites_a_resource_read_and_replays_it_frozen(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    native = FIXTURES / "native.toml"
    quote = "content of the static text resource"

    async def agent(session: Session) -> None:
        read = await session.read_resource("test://static-text")
        assert read["contents"][0]["text"] == TEXT.decode()
        prompt = await session.get_prompt("test_simple_prompt")
        assert prompt["messages"][0]["content"]["text"] == "This is a simple prompt for testing."
        session.answer(f'The resource holds "{quote}" [read_1].')

    async def record() -> str:
        async with record_session(native, root=root, task="quote a resource") as session:
            await agent(session)
        assert session.run_id is not None
        return session.run_id

    run_id = asyncio.run(record())
    run = root / "runs" / run_id
    [claim] = json.loads((run / "claims.json").read_text(encoding="utf-8"))
    assert (claim["type"], claim["status"]) == ("derived", "validated")
    [support] = claim["supports"]
    start = TEXT.index(quote.encode())
    assert (support["start"], support["end"]) == (start, start + len(quote))
    assert support["sha256"] == digest(quote.encode())
    assert support["evidence"] == "evidence_" + digest(TEXT).removeprefix("sha256:")
    assert claim["citations"] == [{"schema_version": 1, "support": 0, "text": quote}]
    assert verify_run(run).ok
    replayed = asyncio.run(replay_session(run, agent))
    assert (replayed.identical, replayed.live_calls) == (True, 0)

    async def elsewhere(session: Session) -> None:
        await session.read_resource("test://watched-resource")

    with pytest.raises(ReplayRefused) as refused:
        asyncio.run(replay_session(run, elsewhere))
    assert refused.value.message == (
        "frozen replay refused: the agent asked {'method': 'resources/read', 'uri': "
        "'test://watched-resource'}, which the recording does not hold; a live read would "
        "be a new run"
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("calls", "reads", "said"),
    [(1, 0, "1 call"), (2, 1, "2 calls and 1 read"), (1, 2, "1 call and 2 reads")],
)
def test_serve_record_says_how_many_calls_and_reads_it_kept(
    calls: int, reads: int, said: str, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    port = free_port()
    native = FIXTURES / "native.toml"
    args = ["serve", "-c", str(native), "--http", f"127.0.0.1:{port}", "--record", str(root)]
    with spawn(args, port) as process:

        async def session() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                for _ in range(reads):
                    await client.read_resource("test://static-text")
                for _ in range(calls):
                    await client.call_tool("test_simple_text", {})

        asyncio.run(session())
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        assert process.stderr is not None
        stderr = process.stderr.read().decode("utf-8")
    [run] = (root / "runs").iterdir()
    recorded = [line for line in stderr.splitlines() if line.startswith("toolproof: recorded")]
    assert recorded == [
        f"toolproof: recorded {said} in {run} (verify: toolproof verify {run.name} --root {root})"
    ]
