"""An ``httpx`` transport recording every exchange as a model turn, or serving it frozen.

Any SDK built on httpx takes a client with this transport: ``openai``'s
``AsyncOpenAI(http_client=httpx.AsyncClient(transport=session.httpx_transport()))``,
``anthropic``'s likewise. Each request is one model turn (source ``http``):

* recorded: the method, the URL (values of :data:`SECRET_QUERY_PARAMS` replaced by
  ``REDACTED``), the exact request body bytes, the status, the exact response body
  bytes (as the SDK reads them: a compressed body is stored decoded) and only the
  headers of :data:`REQUEST_HEADERS_KEPT` / :data:`RESPONSE_HEADERS_KEPT`. Secrets never
  enter the run: ``Authorization``, ``Proxy-Authorization``, ``api-key``, ``x-api-key``,
  ``Cookie`` and ``Set-Cookie`` (:data:`SECRET_HEADERS`) are never kept, and no header
  outside the allow-lists is;
* matched, frozen, by method, URL and body (a JSON body canonically); headers are
  ignored, since SDKs vary them per call (``x-stainless-retry-count``,
  ``x-stainless-read-timeout``, ``user-agent``, idempotency keys). A replayed response
  carries the recorded status, kept headers and body; nothing reaches the network.

A request that fails before a response (a refused connection, a timeout) is not a turn:
the error reaches the SDK unrecorded (it may retry; each answered attempt is a turn).
The whole response body is read before it is handed on, so a streamed (SSE) response
arrives at once.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from toolproof.identity import digest
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.turns import turn_key
from toolproof.sessions.port import SessionPort, turn_recorded
from toolproof.tools import hooks

__all__ = [
    "REQUEST_HEADERS_KEPT",
    "RESPONSE_HEADERS_KEPT",
    "SECRET_HEADERS",
    "SECRET_QUERY_PARAMS",
    "SOURCE",
    "RecordingTransport",
    "kept_headers",
    "recorded_url",
]

SOURCE = "http"
"""The ``source`` of the turns this transport records."""

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie"}
)
"""Headers never recorded, whatever an allow-list says."""
REQUEST_HEADERS_KEPT = (
    "accept",
    "anthropic-beta",
    "anthropic-version",
    "content-type",
    "openai-beta",
)
"""The request headers a recorded turn keeps (lowercase); every other one is dropped."""
RESPONSE_HEADERS_KEPT = ("content-type", "openai-model", "request-id", "x-request-id")
"""The response headers a recorded turn keeps and a frozen replay serves (lowercase)."""
SECRET_QUERY_PARAMS = frozenset(
    {"key", "api_key", "api-key", "apikey", "access_token", "token", "sig", "signature"}
)
"""URL query parameters whose values are recorded as ``REDACTED`` (Gemini's ``?key=``)."""

assert not SECRET_HEADERS & set(REQUEST_HEADERS_KEPT + RESPONSE_HEADERS_KEPT)

_UNSERVED = frozenset({"content-encoding", "content-length", "transfer-encoding"})
"""Headers of the live response not handed on with the decoded body it was read into."""
_UNSERVED_RAW = frozenset(name.encode("ascii") for name in _UNSERVED)


_WANTED = {
    REQUEST_HEADERS_KEPT: frozenset(REQUEST_HEADERS_KEPT) - SECRET_HEADERS,
    RESPONSE_HEADERS_KEPT: frozenset(RESPONSE_HEADERS_KEPT) - SECRET_HEADERS,
}
"""The names the module's two allow-lists keep (others are computed per call)."""
_WANTED_RAW = {
    allowed: frozenset(name.encode("ascii") for name in names) for allowed, names in _WANTED.items()
}
""":data:`_WANTED` as the ASCII bytes of the names."""


def kept_headers(headers: httpx.Headers, allowed: tuple[str, ...]) -> dict[str, str]:
    """The allow-listed headers, lowercase names, multiple values joined by ``", "``.

    Args:
        headers: a request's or a response's headers.
        allowed: the lowercase names to keep (:data:`SECRET_HEADERS` never are).

    Returns:
        ``{name: value}`` in the order of ``allowed``: the values of ``headers.multi_items()``
        whose lowercased name is allowed, decoded as httpx decodes them
        (``headers.encoding``). When every name and every kept value is ASCII (what HTTP
        allows) they are read from the raw bytes, without working out the encoding of
        all the headers: any encoding httpx picks decodes ASCII alike, so the result is
        the same (a test holds the two ways equal).

    """
    wanted = _WANTED.get(allowed)
    if wanted is None:
        wanted = frozenset(allowed) - SECRET_HEADERS
    wanted_raw = _WANTED_RAW.get(allowed)
    if wanted_raw is None:
        wanted_raw = frozenset(name.encode("ascii") for name in wanted if name.isascii())
    out: dict[str, str] = {}
    for raw_name, raw_value in headers.raw:
        if not raw_name.isascii():  # str.lower() of a decoded name may differ (U+212A)
            break
        lowered = raw_name.lower()  # as str.lower() of an ASCII name
        if lowered in wanted_raw:
            if not raw_value.isascii():
                break
            name, value = lowered.decode("ascii"), raw_value.decode("ascii")
            out[name] = f"{out[name]}, {value}" if name in out else value
    else:
        return {name: out[name] for name in allowed if name in out}
    out = {}
    for name, value in headers.multi_items():
        name = name.lower()
        if name in wanted:
            out[name] = f"{out[name]}, {value}" if name in out else value
    return {name: out[name] for name in allowed if name in out}


def recorded_url(url: httpx.URL) -> str:
    """The URL as recorded: userinfo dropped, secret query values ``REDACTED``."""
    text = str(url)
    recorded = _RECORDED_URLS.get(text)
    if recorded is None:
        recorded = _recorded_url(text)
        if len(_RECORDED_URLS) >= _RECORDED_URLS_KEPT:
            _RECORDED_URLS.clear()
        _RECORDED_URLS[text] = recorded
    return recorded


def _recorded_url(text: str) -> str:
    parts = urlsplit(text)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, "REDACTED" if k.lower() in SECRET_QUERY_PARAMS else v) for k, v in pairs]
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_RECORDED_URLS: dict[str, str] = {}
""":func:`recorded_url` by URL text: an SDK asks the same few endpoints turn after turn."""
_RECORDED_URLS_KEPT = 256
"""URLs :data:`_RECORDED_URLS` holds at most (then it starts again, empty)."""


def _inference(path: str, body: bytes) -> tuple[str, str]:
    """The GenAI operation and model a request names (the span of its turn).

    The operation comes from an OpenAI-style path (``/embeddings``, ``/completions``,
    else ``chat``), the model from a JSON body's ``"model"`` (else the path).
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
    return operation, model if isinstance(model, str) and model else path


def _served_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    """The live response's headers handed on: lowercase names, :data:`_UNSERVED` dropped.

    Raw bytes, so httpx takes them as they are instead of encoding text again (what
    ``[(k, v) for k, v in headers.multi_items() if k not in _UNSERVED]`` gives, as bytes,
    wherever that list can be encoded; a test holds the two equal).
    """
    out = []
    for raw_name, value in headers.raw:
        lowered = raw_name.lower()
        if lowered not in _UNSERVED_RAW:
            out.append((lowered, value))
    return out


def _read_response(
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    request: httpx.Request,
    extensions: dict[str, Any],
    *,
    direct: bool | None = None,
) -> httpx.Response:
    """``httpx.Response(status, headers=headers, content=body, ...)``: a read, closed response.

    That constructor reads ``body`` back through httpx's whole stream pipeline (content
    decoder, two chunkers, two generators, two request contexts: about 12 us). Built
    *directly*, the response is made around a ``ByteStream`` of ``body``, with the
    ``Content-Length`` the constructor adds, and left as the constructor leaves it:
    content loaded, stream consumed, closed (``num_bytes_downloaded`` 0 both ways).

    Args:
        status: the status code.
        headers: the raw header pairs, as :func:`_served_headers` hands them on: no
            ``Content-Length``, ``Content-Encoding`` or ``Transfer-Encoding`` (with
            those the constructor would keep its own length or decode the body).
        body: the whole (decoded) body.
        request: the request answered.
        extensions: the response extensions.
        direct: build directly (``True``) or by the constructor (``False``); ``None``:
            directly where :data:`_BUILDS_READ` says this httpx builds the same response.

    """
    if not (_BUILDS_READ if direct is None else direct):
        return httpx.Response(
            status, headers=headers, content=body, request=request, extensions=extensions
        )
    if body:
        headers = [*headers, (b"Content-Length", b"%d" % len(body))]
    response = httpx.Response(
        status,
        headers=headers,
        stream=httpx.ByteStream(body),
        request=request,
        extensions=extensions,
    )
    response._content = body
    response.is_stream_consumed = True
    response.is_closed = True
    response.headers.encoding  # noqa: B018 - worked out, as the constructor's read leaves it
    return response


_READ_STATE_NOT_COMPARED = frozenset({"stream", "_decoder"})
"""What a read response holds that :func:`_builds_read` does not compare: the stream (another
``ByteStream`` of the same bytes) and the content decoder the read chose (unused once read)."""


def _builds_read() -> bool:
    """Whether :func:`_read_response` builds directly what the constructor builds, in this httpx.

    Both ways build responses to one request, with and without a body; each state the
    constructor's response holds (its instance attributes but :data:`_READ_STATE_NOT_COMPARED`,
    the headers' own included) must be in the direct one, equal, and nothing else; and
    both must read, iterate and refuse a raw read alike.
    """
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions", content=b"{}")
    headers = [(b"content-type", b"application/json")]
    for body in (b'{"id":"x"}', b""):
        built, read = (
            _read_response(200, headers, body, request, {"http_version": b"HTTP/1.1"}, direct=d)
            for d in (True, False)
        )
        theirs = {k: v for k, v in vars(read).items() if k not in _READ_STATE_NOT_COMPARED}
        ours = {k: v for k, v in vars(built).items() if k not in _READ_STATE_NOT_COMPARED}
        if theirs.keys() != ours.keys():
            return False
        for name, value in theirs.items():
            if name == "headers":  # its pairs and the encoding it worked out
                if vars(value) != vars(ours[name]):
                    return False
            elif value != ours[name]:
                return False
        if (built.read(), list(built.iter_bytes())) != (read.read(), list(read.iter_bytes())):
            return False
        for response in (built, read):
            try:
                list(response.iter_raw())
            except httpx.StreamConsumed:
                continue
            return False
    return True


_BUILDS_READ = _builds_read()
"""Whether this httpx builds a read response directly as its constructor does (checked at
import; :func:`_read_response` uses the constructor otherwise)."""


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
        started = time.perf_counter()
        body = await request.aread()
        url = recorded_url(request.url)
        method = request.method.upper()
        key = turn_key(SOURCE, body, method=method, url=url)
        recorded = self.session.known_turn(SOURCE, key)
        if recorded is not None:
            headers = recorded.detail.get("response_headers") or {}
            served = httpx.Response(
                int(recorded.detail.get("status", 200)),
                headers=headers,
                content=recorded.response,
                request=request,
            )
            served.elapsed = timedelta(seconds=time.perf_counter() - started)
            return served
        step = self.session.admit_turn(SOURCE)
        if hooks.ACTIVE is None:  # telemetry off: model_turn would hand out NO_SPAN
            live, answer = await self._ask(request)
            self.session.record_turn(
                self._turn(request, body, answer, live, method, url, key), step
            )
        else:
            operation, model = _inference(request.url.path, body)  # for the span only
            with hooks.model_turn(model, operation=operation) as span:
                live, answer = await self._ask(request)
                turn = self._turn(request, body, answer, live, method, url, key)
                turn_recorded(span, self.session.record_turn(turn, step), turn)
                span.set_attribute("http.response.status_code", live.status_code)
                if live.status_code >= 400:
                    hooks.fail(span, str(live.status_code), f"HTTP {live.status_code}")
        served = _read_response(
            live.status_code,
            _served_headers(live.headers),
            answer,
            request,
            {k: v for k, v in live.extensions.items() if k != "network_stream"},
        )
        served.elapsed = timedelta(seconds=time.perf_counter() - started)
        return served

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
        return ModelExchange.built(
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
