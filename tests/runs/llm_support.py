"""A scripted OpenAI-compatible endpoint on 127.0.0.1 (a real HTTP server, in a thread).

Used to cause what a real model server cannot be made to do on demand: a 429 with
``Retry-After``, a 500, a body that is not JSON, a refusal, a slow answer, a stream of
server-sent events written chunk by chunk (``sse_reply``). Each queued
reply is served once, in order; the last one repeats. Every request is kept
(path, headers, parsed body) so tests can check what was sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: list[bytes] | None = None  # a stream: each written and flushed on its own


def chat_reply(content: str, *, refusal: str | None = None, finish: str = "stop") -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return Reply(body=json.dumps(body).encode())


def sse_reply(*contents: str) -> Reply:
    """An OpenAI-compatible ``stream=True`` answer: one ``data:`` event per content delta.

    Each event is its own chunk (written and flushed; 20 ms apart, so the network keeps
    them apart as a model server's tokens are), then ``data: [DONE]``.
    """
    chunks = []
    for n, content in enumerate(["", *contents]):
        delta = {"role": "assistant", "content": content} if n == 0 else {"content": content}
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        chunks.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    return Reply(chunks=chunks, delay=0.02)


def tool_call_reply(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    """A chat completion whose assistant message asks for one tool call, ``call_id``."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return Reply(body=json.dumps(body).encode())


def answer_reply(answer: str | None, quotes: list[tuple[str, str]]) -> Reply:
    payload = {"answer": answer, "quotes": [{"evidence": e, "text": t} for e, t in quotes]}
    return chat_reply(json.dumps(payload))


@dataclass
class Scripted:
    base_url: str
    replies: list[Reply]
    requests: list[dict[str, Any]]

    def script(self, *replies: Reply) -> None:
        self.replies[:] = list(replies)


@contextmanager
def scripted_model(*replies: Reply, port: int = 0) -> Iterator[Scripted]:
    """Serve ``replies`` on 127.0.0.1:``port`` (0: a free one) until the block ends."""
    queue: list[Reply] = list(replies)
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            seen.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": json.loads(raw) if raw else None,
                }
            )
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
            if reply.chunks is not None:
                self._stream(reply)
                return
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _stream(self, reply: Reply) -> None:
            # HTTP/1.0: no length, the body ends when the connection closes
            assert reply.chunks is not None
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    time.sleep(reply.delay)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Scripted(f"http://127.0.0.1:{server.server_address[1]}/v1", queue, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
