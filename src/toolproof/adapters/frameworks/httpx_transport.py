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
  ``Authorization``, ``Cookie``, ``x-api-key``...) never is, whatever an allow-list says;
* matched, frozen, by method, URL and body as recorded (redacted the same way, so the
  same secret matches; a JSON body canonically); headers are
  ignored, since SDKs vary them per call (``x-stainless-retry-count``,
  ``x-stainless-read-timeout``, ``user-agent``, idempotency keys). A replayed response
  carries the recorded status, kept headers and body; nothing reaches the network.

A request that fails before a response (a refused connection, a timeout) is not a turn:
the error reaches the SDK unrecorded (it may retry; each answered attempt is a turn).
The whole response body is read before it is handed on, so a streamed (SSE) response
arrives at once.
"""

from __future__ import annotations

import functools
import json
from types import TracebackType
from typing import Any

import httpx

from toolproof.identity import digest
from toolproof.redaction import redact_body, redact_headers, redact_url, secret_name
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import turn_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "REQUEST_HEADERS_KEPT",
    "RESPONSE_HEADERS_KEPT",
    "SOURCE",
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
        recorded = self.session.known_turn(SOURCE, key)
        if recorded is not None:
            headers = recorded.detail.get("response_headers") or {}
            return _served(int(recorded.detail.get("status", 200)), headers, recorded.response)
        step = self.session.admit_turn(SOURCE)
        operation, model = _inference(request.url.path, body)  # for the span only
        with hooks.model_turn(model, operation=operation) as span:
            live, answer = await self._ask(request)
            turn = self._turn(request, body, answer, live, method, url, key)
            turn_recorded(span, self.session.record_turn(turn, step), turn)
            span.set_attribute("http.response.status_code", live.status_code)
            if live.status_code >= 400:
                hooks.fail(span, str(live.status_code), f"HTTP {live.status_code}")
        return _served(
            live.status_code,
            [(name, value) for name, value in live.headers.raw if name.lower() not in _UNSERVED],
            answer,
            {k: v for k, v in live.extensions.items() if k != "network_stream"},
        )

    async def _ask(self, request: httpx.Request) -> tuple[httpx.Response, bytes]:
        """The live response to ``request`` and its whole body, read and closed."""
        live = await self.inner.handle_async_request(request)
        try:
            answer = await live.aread()
        finally:
            await live.aclose()
        return live, answer

    @staticmethod
    def _turn(
        request: httpx.Request,
        body: bytes,
        answer: bytes,
        live: httpx.Response,
        method: str,
        url: str,
        key: bytes,
    ) -> ModelExchange:
        """The exchange to record: the bodies, the status and the kept headers.

        A body's media type is its kept ``content-type`` (both allow-lists hold it: the
        value ``headers.get("content-type")`` gives), else ``application/octet-stream``.
        """
        request_headers = kept_headers(request.headers, REQUEST_HEADERS_KEPT)
        response_headers = kept_headers(live.headers, RESPONSE_HEADERS_KEPT)
        return ModelExchange(
            source=SOURCE,
            model=f"{method} {url}",
            request=body,
            response=answer,
            key=digest(key),
            request_media_type=request_headers.get("content-type") or _OCTET_STREAM,
            response_media_type=response_headers.get("content-type") or _OCTET_STREAM,
            detail={
                "method": method,
                "url": url,
                "status": live.status_code,
                "request_headers": request_headers,
                "response_headers": response_headers,
            },
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
