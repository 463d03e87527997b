"""An ``httpx`` transport recording every exchange as a model turn, or serving it frozen.

Any SDK built on httpx takes a client with this transport: ``openai``'s
``AsyncOpenAI(http_client=httpx.AsyncClient(transport=session.httpx_transport()))``,
``anthropic``'s likewise. Each request is one model turn (source ``http``):

* recorded, by the redaction policy of :mod:`toolproof.redaction`: the method, the URL
  (:func:`~toolproof.redaction.redact_url`: userinfo removed, secret query and matrix
  values, bot-token path segments and the fragment as ``REDACTED:sha256:<16 hex>``), the
  request body bytes (exact, unless a JSON or form body holds a secret field:
  :func:`~toolproof.redaction.redact_body`), the status, the exact response body bytes
  (as the SDK reads them: a compressed body is stored decoded) and only the headers of
  :data:`REQUEST_HEADERS_KEPT` / :data:`RESPONSE_HEADERS_KEPT` (a redirect's
  ``location`` through the URL rule). Secrets never enter the run: no header outside the
  allow-lists is kept, and a secret name (:func:`~toolproof.redaction.secret_name`:
  ``Authorization``, ``Cookie``, ``x-api-key``...) never is, whatever an allow-list says.
  The request's ``User-Agent`` (the client and its version, ``AsyncOpenAI/Python
  3.63.0``) is kept as the turn's ``client``, which a refusal names beside the asked
  request's when they differ;
* matched, frozen, by method, URL and body as recorded (redacted the same way, so the
  same secret matches; a JSON body canonically, an OpenAI-compatible chat completions
  body by its normal form, :mod:`toolproof.runs.normal_form`); headers are
  ignored, since SDKs vary them per call (``x-stainless-retry-count``,
  ``x-stainless-read-timeout``, ``user-agent``, idempotency keys). A replayed response
  carries the recorded status, kept headers and body; nothing reaches the network.

A request that fails before a response (a refused connection, a timeout) is not a turn:
the error reaches the SDK unrecorded (it may retry; each answered attempt is a turn).

A response whose media type is in :data:`STREAMED_MEDIA_TYPES` (an OpenAI-compatible
``stream=True`` request's ``text/event-stream``) is *streamed*: it is handed on unread,
each chunk as it arrives from the network (decoded), and recorded when its last chunk
has been read: the response body is the exact bytes of every chunk, in order, and
``detail.stream.chunks`` the size of each. A stream closed before its end is read to
its end first, then recorded. Its span (:func:`toolproof.tools.hooks.model_turn`) lasts
until the response's headers arrive and carries no response digest. Frozen, a streamed
turn is served as an unread ``httpx.Response`` whose stream yields the recorded chunks,
byte for byte and with the same boundaries. Any other response body is read whole
before it is handed on.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

import httpx

from toolproof.identity import digest
from toolproof.redaction import redact_body, redact_headers, redact_url, secret_name
from toolproof.runs.recorded import stream_detail
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import turn_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "REQUEST_HEADERS_KEPT",
    "RESPONSE_HEADERS_KEPT",
    "SOURCE",
    "STREAMED_MEDIA_TYPES",
    "RecordingTransport",
    "kept_headers",
    "recorded_url",
]

SOURCE = "http"
"""The ``source`` of the turns this transport records."""

REQUEST_HEADERS_KEPT = (
    "accept",
    "anthropic-beta",
    "anthropic-version",
    "content-type",
    "openai-beta",
)
"""The request headers a recorded turn keeps (lowercase); every other one is dropped."""
RESPONSE_HEADERS_KEPT = (
    "content-type",
    "location",
    "openai-model",
    "request-id",
    "x-request-id",
)
"""The response headers a recorded turn keeps and a frozen replay serves (lowercase;
``location`` through :func:`~toolproof.redaction.redact_url`)."""

STREAMED_MEDIA_TYPES = ("text/event-stream", "application/x-ndjson")
"""The response media types (lowercase, parameters ignored) handed on and recorded as
streams, chunk by chunk: server-sent events (OpenAI-compatible and Anthropic
``stream=True``) and newline-delimited JSON (Ollama)."""

assert not any(secret_name(name) for name in REQUEST_HEADERS_KEPT + RESPONSE_HEADERS_KEPT)

_UNSERVED = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})
"""Headers of the live response (lowercase ASCII) not handed on with the decoded body it
was read into."""


@functools.lru_cache(maxsize=16)
def _wanted(allowed: tuple[str, ...]) -> frozenset[str]:
    """The names of ``allowed`` that are not secret (:func:`~toolproof.redaction.secret_name`)."""
    return frozenset(name for name in allowed if not secret_name(name))


def kept_headers(headers: httpx.Headers, allowed: tuple[str, ...]) -> dict[str, str]:
    """The allow-listed headers, lowercase names, multiple values joined by ``", "``.

    Args:
        headers: a request's or a response's headers.
        allowed: the lowercase names to keep (a secret name never is).

    Returns:
        ``{name: value}`` in the order of ``allowed``: the values of
        ``headers.multi_items()`` whose lowercased name is allowed, through
        :func:`~toolproof.redaction.redact_headers` (a ``location`` by the URL rule).

    """
    wanted = _wanted(allowed)
    out: dict[str, str] = {}
    for name, value in headers.multi_items():
        name = name.lower()
        if name in wanted:
            if name == "location":  # the one kept header the policy rewrites
                [(name, value)] = redact_headers([(name, value)])
            out[name] = f"{out[name]}, {value}" if name in out else value
    return {name: out[name] for name in allowed if name in out}


def recorded_url(url: httpx.URL) -> str:
    """The URL as recorded: :func:`toolproof.redaction.redact_url` of ``str(url)``."""
    return redact_url(str(url))


def _inference(path: str, body: bytes) -> tuple[str, str]:
    """The GenAI operation and model a request names (the span of its turn).

    The operation comes from an OpenAI-style path (``/embeddings``, ``/completions``,
    else ``chat``), the model from a JSON body's ``"model"`` (else the path, through
    :func:`~toolproof.redaction.redact_url`: a bot-token segment never names a span).
    """
    operation = "chat"
    if path.endswith("/embeddings"):
        operation = "embeddings"
    elif path.endswith("/completions") and not path.endswith("/chat/completions"):
        operation = "text_completion"
    model: Any = None
    try:
        parsed = json.loads(body) if body[:1] == b"{" else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        model = parsed.get("model")
    return operation, model if isinstance(model, str) and model else redact_url(path)


def _client(headers: httpx.Headers) -> dict[str, str]:
    """``{"client": <the User-Agent>}`` of a request (``{}`` without one)."""
    agent = headers.get("user-agent")
    return {"client": agent} if agent else {}


def _served(
    status: int,
    headers: list[tuple[bytes, bytes]] | dict[str, str],
    body: bytes,
    extensions: dict[str, Any] | None = None,
) -> httpx.Response:
    """The response handed to the client: unread, as httpx's own transports return one.

    ``httpx.Response(status, headers=..., stream=httpx.ByteStream(body), extensions=...)``
    with a ``Content-Length`` of ``body`` added; the client reads it, closes it and sets
    its ``.elapsed``.

    Args:
        status: the status code.
        headers: the header pairs to serve, without ``Content-Length``,
            ``Content-Encoding`` or ``Transfer-Encoding``.
        body: the whole (decoded) body.
        extensions: the response extensions.

    """
    served = httpx.Headers(headers)
    served["Content-Length"] = str(len(body))
    return httpx.Response(
        status, headers=served, stream=httpx.ByteStream(body), extensions=extensions or {}
    )


_OCTET_STREAM = "application/octet-stream"
"""The media type of a body whose headers name none."""
assert "content-type" in REQUEST_HEADERS_KEPT and "content-type" in RESPONSE_HEADERS_KEPT


def _streamed(live: httpx.Response) -> bool:
    """Whether ``live``'s media type is one of :data:`STREAMED_MEDIA_TYPES`."""
    media_type = live.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type in STREAMED_MEDIA_TYPES


class _Recording(httpx.AsyncByteStream):
    """A live stream handed on chunk by chunk, recorded (``ended``) once it has been read whole.

    One pass over the live response's decoded chunks, however often it is iterated (an SDK
    reads a few events, then drains the rest through ``response.stream``); closing it
    before its end reads the rest first, so the turn is always recorded whole.
    """

    def __init__(self, live: httpx.Response, ended: Callable[[list[bytes]], None]) -> None:
        self._live = live
        self._source = live.aiter_bytes()
        self._chunks: list[bytes] = []
        self._ended = ended
        self._done = False

    async def _next(self) -> bytes | None:
        """The next chunk, or ``None`` at the end (recorded then, once)."""
        if self._done:
            return None
        try:
            chunk = await anext(self._source)
        except StopAsyncIteration:
            self._done = True
            self._ended(self._chunks)
            return None
        self._chunks.append(chunk)
        return chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self._next()) is not None:
            yield chunk

    async def aclose(self) -> None:
        try:
            while await self._next() is not None:
                pass
        finally:
            await self._live.aclose()


class _Replayed(httpx.AsyncByteStream):
    """A recorded stream served frozen: its chunks, exactly, in their boundaries.

    One pass, as a live stream is: iterating it again goes on where the last one stopped.
    """

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = iter(chunks)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class RecordingTransport(httpx.AsyncBaseTransport):
    """Records each exchange in ``session`` (live) or serves it from the recording (frozen).

    Args:
        session: the session recording the turns.
        inner: the transport reaching the network live (default
            ``httpx.AsyncHTTPTransport()``, created on first use; never when frozen).

    """

    def __init__(self, session: SessionPort, inner: httpx.AsyncBaseTransport | None = None):
        self.session = session
        self._inner = inner

    @property
    def inner(self) -> httpx.AsyncBaseTransport:
        """The live transport."""
        if self._inner is None:
            self._inner = httpx.AsyncHTTPTransport()
        return self._inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` (recorded) or answer it from the recording (frozen).

        Raises:
            ReplayRefused: frozen, and no recorded turn has this method, URL and body.
            RecordingError: live, and the turn cannot be recorded.
            httpx.HTTPError: live, the inner transport's errors, unrecorded.

        """
        sent = await request.aread()
        body = redact_body(sent, request.headers.get("content-type"))
        url = recorded_url(request.url)
        method = request.method.upper()
        key = turn_key(SOURCE, body, method=method, url=url)
        client = _client(request.headers)
        recorded = self.session.known_turn(SOURCE, key, asked=client)
        if recorded is not None:
            headers = recorded.detail.get("response_headers") or {}
            status = int(recorded.detail.get("status", 200))
            chunks = recorded.chunks()
            if chunks is not None:
                return httpx.Response(status, headers=headers, stream=_Replayed(chunks))
            return _served(status, headers, recorded.response)
        step = self.session.admit_turn(SOURCE)
        operation, model = _inference(request.url.path, body)  # for the span only
        with hooks.model_turn(model, operation=operation) as span:
            live = await self.inner.handle_async_request(request)
            span.set_attribute("http.response.status_code", live.status_code)
            if live.status_code >= 400:
                hooks.fail(span, str(live.status_code), f"HTTP {live.status_code}")
            served = [(n, v) for n, v in live.headers.raw if n.lower() not in _UNSERVED]
            extensions = {k: v for k, v in live.extensions.items() if k != "network_stream"}
            if _streamed(live):
                if span is not hooks.NO_SPAN:
                    span.set_attribute("toolproof.step", step)
                    span.set_attribute("toolproof.turn.source", SOURCE)
                    span.set_attribute("toolproof.request_digest", digest(body))

                def ended(chunks: list[bytes]) -> None:
                    turn = self._turn(request, body, chunks, live, (method, url, key), client)
                    self.session.record_turn(turn, step)

                stream = _Recording(live, ended)
                return httpx.Response(
                    live.status_code, headers=served, stream=stream, extensions=extensions
                )
            try:
                answer = await live.aread()
            finally:
                await live.aclose()
            turn = self._turn(request, body, answer, live, (method, url, key), client)
            turn_recorded(span, self.session.record_turn(turn, step), turn)
        return _served(live.status_code, served, answer, extensions)

    @staticmethod
    def _turn(
        request: httpx.Request,
        body: bytes,
        answer: bytes | list[bytes],
        live: httpx.Response,
        asked: tuple[str, str, bytes],
        client: dict[str, str],
    ) -> ModelExchange:
        """The exchange to record: the bodies, the status, the kept headers and the client.

        ``asked`` is the request's method, recorded URL and match key.

        ``answer``: the whole response body, or a stream's chunks (the body is their
        bytes in order; ``detail.stream``: :func:`~toolproof.runs.recorded.stream_detail`).
        A body's media type is its kept ``content-type`` (both allow-lists hold it: the
        value ``headers.get("content-type")`` gives), else ``application/octet-stream``.
        """
        method, url, key = asked
        request_headers = kept_headers(request.headers, REQUEST_HEADERS_KEPT)
        response_headers = kept_headers(live.headers, RESPONSE_HEADERS_KEPT)
        detail: dict[str, Any] = {
            "method": method,
            "url": url,
            "status": live.status_code,
            "request_headers": request_headers,
            "response_headers": response_headers,
            **client,
        }
        if isinstance(answer, list):
            detail["stream"] = stream_detail(answer)
            answer = b"".join(answer)
        return ModelExchange(
            source=SOURCE,
            model=f"{method} {url}",
            request=body,
            response=answer,
            key=digest(key),
            request_media_type=request_headers.get("content-type") or _OCTET_STREAM,
            response_media_type=response_headers.get("content-type") or _OCTET_STREAM,
            detail=detail,
        )

    async def aclose(self) -> None:
        """Close the inner transport, if one was made."""
        if self._inner is not None:
            await self._inner.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        mode = "frozen" if self.session.frozen else "live"
        return f"RecordingTransport({mode})"
