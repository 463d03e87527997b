"""The relocation protocol: request and result bytes, framing, the worker's checks."""

from __future__ import annotations

import json
import struct
import threading
from pathlib import Path

import pytest
from backend_support import CONFIG, run
from hypothesis import given
from hypothesis import strategies as st

from toolproof.backends.protocol import (
    MAX_FRAME,
    FrameReader,
    ProtocolError,
    decode_request,
    decode_result,
    descriptor_digest,
    encode_request,
    encode_result,
    frame,
    serve_request,
)
from toolproof.backends.worker import SyncWorkerServer, WorkerServer
from toolproof.config import build_toolset, load_toolset
from toolproof.contract.tools import ToolResult
from toolproof.errors import CanonicalizationError, ConfigError, UsageError


def test_request_is_canonical_json_with_nothing_pickled() -> None:
    data = encode_request("add", {"b": 2, "a": 1.0}, "sha256:ab")
    assert data == (
        b'{"arguments":{"a":1,"b":2},"descriptor":"sha256:ab","protocol":1,"variant":"add"}'
    )
    request = decode_request(data)
    assert (request.variant, request.arguments, request.descriptor) == (
        "add",
        {"a": 1, "b": 2},
        "sha256:ab",
    )


def test_request_refuses_non_json_arguments() -> None:
    with pytest.raises(CanonicalizationError) as caught:
        encode_request("add", {"a": float("nan")}, "sha256:ab")
    assert caught.value.fields["path"] == "$.arguments.a"


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"\xff", "request is not JSON"),
        (b"[]", "request must be a JSON object"),
        (
            b'{"protocol": 2}',
            "request has protocol version 2, this worker speaks 1",
        ),
        (
            b'{"protocol": 1, "variant": 3, "arguments": {}, "descriptor": "d"}',
            "request field 'variant' must be a string",
        ),
        (
            b'{"protocol": 1, "variant": "a", "arguments": [], "descriptor": "d"}',
            "request field 'arguments' must be a JSON object",
        ),
        (
            b'{"protocol": 1, "variant": "a", "arguments": {}}',
            "request field 'descriptor' must be a string",
        ),
    ],
)
def test_bad_requests_are_refused(data: bytes, rule: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_request(data)
    assert caught.value.fields["rule"].startswith(rule)


def test_result_round_trip_and_bad_answers() -> None:
    failure = ToolResult.fail("timeout", "too slow", where="worker", detail={"pid": 3})
    assert decode_result(encode_result(failure)) == failure
    assert decode_result(encode_result(ToolResult.success([1, "x"]))).value == [1, "x"]
    with pytest.raises(ProtocolError) as caught:
        decode_result(b'{"ok": true, "failure": {"kind": "x", "message": "y"}}')
    assert "answer is not a ToolResult" in caught.value.message


@given(
    st.lists(st.binary(max_size=300), max_size=8),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20),
)
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    out: list[bytes] = []
    position, index = 0, 0
    while position < len(stream):
        size = cuts[index % len(cuts)]
        out.extend(reader.feed(stream[position : position + size]))
        position += size
        index += 1
    assert out == payloads
    assert reader.pending == 0


def test_oversized_frame_is_refused() -> None:
    with pytest.raises(ProtocolError) as caught:
        FrameReader().feed(struct.pack(">I", MAX_FRAME + 1))
    assert caught.value.fields["rule"] == (
        f"frame announces {MAX_FRAME + 1} bytes, over {MAX_FRAME} bytes"
    )


def test_worker_server_serves_requests_and_refuses_mismatches() -> None:
    async def go() -> list[dict[str, object]]:
        async with load_toolset(CONFIG) as caller:
            server = WorkerServer(CONFIG, build_toolset)
            await server.start()
            try:
                digest = descriptor_digest(caller["add"])
                answers = [
                    await server.handle(encode_request("add", {"a": 1, "b": 2}, digest)),
                    await server.handle(encode_request("add", {"a": "x", "b": 2}, digest)),
                    await server.handle(encode_request("nope", {}, digest)),
                    await server.handle(b"{}"),
                ]
            finally:
                await server.aclose()
            return [json.loads(answer) for answer in answers]

    ok, invalid, unknown, broken = run(go())
    assert ok == {"failure": None, "ok": True, "schema_version": 1, "value": 3}
    assert invalid["failure"]["kind"] == "invalid_arguments"
    assert unknown["failure"] == {
        "detail": {},
        "kind": "backend",
        "message": "worker toolset has no tool 'nope' (rule: caller and worker build the same "
        "Toolset from the same composition root)",
        "retryable": False,
        "schema_version": 1,
        "where": "worker",
    }
    assert broken["failure"]["message"] == (
        "relocation protocol: request has protocol version None, this worker speaks 1"
    )


def test_serve_request_refuses_another_descriptor() -> None:
    async def go() -> ToolResult:
        async with load_toolset(CONFIG) as toolset:
            request = decode_request(encode_request("add", {"a": 1, "b": 2}, "sha256:00"))
            return await serve_request(toolset, request)

    failure = run(go()).failure
    assert failure is not None and failure.kind == "descriptor_mismatch"
    assert failure.message.startswith(
        "tool 'add': caller descriptor sha256:00 differs from worker descriptor sha256:"
    )


def test_sync_worker_server_serves_its_thread_and_reports_bad_roots(tmp_path: Path) -> None:
    server = SyncWorkerServer(CONFIG, build_toolset)
    try:
        digest = json.loads(server.handle(encode_request("add", {}, "d")))
        assert digest["failure"]["kind"] == "descriptor_mismatch"
        errors: list[BaseException] = []

        def elsewhere() -> None:
            try:
                server.handle(encode_request("add", {}, "d"))
            except UsageError as exc:
                errors.append(exc)

        other = threading.Thread(target=elsewhere)
        other.start()
        other.join()
        assert [str(e) for e in errors] == [
            "a SyncWorkerServer is used only by the thread that created it"
        ]
    finally:
        server.close()
    server.close()  # idempotent
    with pytest.raises(ConfigError) as caught:
        SyncWorkerServer(tmp_path / "missing.toml", build_toolset)
    assert caught.value.fields["rule"] == "file not found"
