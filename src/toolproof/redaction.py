"""The one credential redaction policy every recorder applies before anything is stored.

A leaf module (it imports only the standard library): the model-turn recorders
(pydantic-ai, the OpenAI Agents SDK, the httpx transport), the chat provider tool and
the MCP source all store requests through it, so a secret handed to a framework never
reaches a run directory (trace, evidence, spec, plan, runtime, failures) or a lock.

**Names.** A name is *secret* (:func:`secret_name`) when, lowercased with ``_`` read as
``-``, it is one of :data:`SECRET_NAMES` or ends with one of :data:`SECRET_SUFFIXES`.
The same test is applied to header names, URL query and ``;matrix`` parameter names,
``application/x-www-form-urlencoded`` body fields and JSON object members. Names
ending in ``-key`` in general (``idempotency-key``, ``prompt_cache_key``) and
``max_tokens``-style names are **not** secret.

**Values.** A secret value becomes ``REDACTED:sha256:<16 hex>`` (:func:`redacted`): the
first 16 hex digits of the SHA-256 of its UTF-8 bytes (of the decoded text for a URL
parameter, of its JSON text for a number). The same secret always gives the same form,
so a frozen replay that sends the same secret still matches; redacting twice changes
nothing. The digest is a fingerprint, not a protection: a short, guessable secret can
be found from it by trying candidates.

**URLs** (:func:`redact_url`): the userinfo (``user:password@``) is removed; every
secret query and ``;matrix`` parameter value (``;jsessionid=``) is redacted; a path
segment shaped like a Telegram bot token (``bot<digits>:<20+ of [A-Za-z0-9_-]>``) is
redacted whole; a non-empty fragment is redacted whole. Everything else keeps its exact
bytes (no re-encoding of the parts that hold no secret).

**JSON** (:func:`redact_json`): every member whose name is secret and whose value is a
string or a number is redacted, at any depth (objects and arrays are walked, never
redacted whole: a JSON Schema's ``"password": {"type": "string"}`` stays); every string
that is a whole absolute URL (``scheme://...``) goes through the URL rule.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

__all__ = [
    "REDACTED_PREFIX",
    "SECRET_NAMES",
    "SECRET_SUFFIXES",
    "is_redacted",
    "may_hold_secret",
    "redact_body",
    "redact_form",
    "redact_headers",
    "redact_json",
    "redact_url",
    "redacted",
    "secret_name",
]

REDACTED_PREFIX = "REDACTED:sha256:"
"""What every redacted value starts with; 16 lowercase hex digits follow."""

SECRET_NAMES = frozenset(
    {
        # headers
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "apikey",
        # query, matrix and body fields
        "key",
        "token",
        "access-token",
        "refresh-token",
        "id-token",
        "auth",
        "code",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "client-secret",
        "secret",
        "password",
        "passwd",
        "jsessionid",
        "phpsessid",
        "sessionid",
    }
)
"""Secret names, lowercase with ``-`` for ``_`` (``access_token`` is ``access-token``)."""

SECRET_SUFFIXES = (
    "-api-key",
    "-apikey",
    "-token",
    "-secret",
    "-password",
    "-secret-key",
    "-access-key",
    "-private-key",
    "-credential",
    "-signature",
)
"""A name ending with one of these (after the ``-`` for ``_`` reading) is secret:
``x-goog-api-key``, ``x-auth-token``, ``aws_secret_access_key``, ``x-amz-credential``."""

_NEEDLES = (
    "auth",
    "cookie",
    "key",
    "token",
    "code",
    "sig",
    "secret",
    "passw",
    "sess",
    "credential",
)
"""Every secret name and suffix holds one of these: text without any of them (and without
``://`` or an escape) holds no secret member, and is not parsed to find one."""
assert all(any(n in name for n in _NEEDLES) for name in (*SECRET_NAMES, *SECRET_SUFFIXES))
_SIGNS = re.compile(b"|".join(re.escape(n.encode()) for n in (*_NEEDLES, "://", "\\u")))
r"""What :func:`may_hold_secret` looks for in lowercased bytes (an escape as ``\u``)."""

_REDACTED = re.compile(r"REDACTED:sha256:[0-9a-f]{16}")
_TELEGRAM = re.compile(r"bot[0-9]+:[A-Za-z0-9_-]{20,}")
_ABSOLUTE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s]*")


def secret_name(name: str) -> bool:
    """Whether ``name`` (a header, parameter or field name) is secret by this policy.

    Args:
        name: the name, any case; ``_`` and ``-`` are the same character here.

    Returns:
        True when the normalized name is in :data:`SECRET_NAMES` or ends with one of
        :data:`SECRET_SUFFIXES`.

    """
    return _secret_name(name)


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    normal = name.strip().lower().replace("_", "-")
    return normal in SECRET_NAMES or normal.endswith(SECRET_SUFFIXES)


def may_hold_secret(data: bytes) -> bool:
    r"""Whether ``data`` (JSON or form text) may hold something this policy redacts.

    False only when the lowercased bytes contain no fragment every secret name holds
    (``auth``, ``cookie``, ``key``, ``token``, ``code``, ``sig``, ``secret``,
    ``passw``, ``sess``, ``credential``), no ``://`` and no ``\u`` escape: such
    text has no secret member, no URL and no name spelled with escapes.
    """
    return _SIGNS.search(data.lower()) is not None


def is_redacted(value: object) -> bool:
    """Whether ``value`` is already a redacted form (``REDACTED:sha256:<16 hex>``)."""
    return isinstance(value, str) and _REDACTED.fullmatch(value) is not None


def redacted(value: str | int | float) -> str:
    """The redacted form of one secret value.

    Args:
        value: the secret: a string (hashed as UTF-8; a lone surrogate as its
            ``surrogatepass`` bytes) or a number (hashed as its JSON text).

    Returns:
        ``"REDACTED:sha256:" + sha256(bytes).hexdigest()[:16]``; ``value`` itself when it
        already is a redacted form (so redaction is idempotent).

    """
    if is_redacted(value):
        return str(value)
    text = value if isinstance(value, str) else json.dumps(value)
    data = text.encode("utf-8", "surrogatepass")
    return REDACTED_PREFIX + hashlib.sha256(data).hexdigest()[:16]


def _pairs(text: str, separator: str, decode: Any) -> tuple[str, bool]:
    """``text`` (``name=value`` items joined by ``separator``) with secret values redacted.

    Returns the text (unchanged items keep their exact bytes) and whether any changed.
    """
    changed = False
    items = text.split(separator)
    for index, item in enumerate(items):
        name, equals, value = item.partition("=")
        if equals and value and secret_name(decode(name)) and not is_redacted(decode(value)):
            items[index] = f"{name}={redacted(decode(value))}"
            changed = True
    return separator.join(items), changed


def redact_form(text: str) -> str:
    """A query string (or form body) with each secret parameter's value redacted.

    Args:
        text: ``name=value`` pairs joined by ``&`` (percent- and ``+``-encoded).

    Returns:
        ``text`` with the value of each pair whose decoded name is secret replaced by
        :func:`redacted` of its decoded value; every other byte unchanged.

    """
    return _pairs(text, "&", unquote_plus)[0]


def _segment(segment: str) -> str:
    if _TELEGRAM.fullmatch(unquote(segment)):
        return redacted(unquote(segment))
    head, semicolon, params = segment.partition(";")
    if not semicolon:
        return segment
    return f"{head};{_pairs(params, ';', unquote)[0]}"


def redact_url(url: str) -> str:
    """The URL as it may be stored (the URL rule of the module docstring).

    Args:
        url: an absolute or relative URL.

    Returns:
        ``url`` without userinfo, with secret query and matrix parameter values, Telegram
        bot-token path segments and a non-empty fragment redacted; ``url`` unchanged when
        it holds none of those. A string that does not parse as a URL is returned as is.

    """
    if not any(mark in url for mark in ("@", "?", ";", "#", "bot")):
        return url  # nothing the rule could redact
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    path = "/".join(_segment(segment) for segment in parts.path.split("/"))
    query = redact_form(parts.query) if parts.query else parts.query
    fragment = redacted(unquote(parts.fragment)) if parts.fragment else ""
    if (netloc, path, query, fragment) == (parts.netloc, parts.path, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Header pairs with the value of each secret name redacted (order and names kept).

    Args:
        headers: ``(name, value)`` pairs; a ``location`` value goes through the URL rule.

    Returns:
        The pairs, each secret one as ``(name, redacted(value))``.

    """
    out: list[tuple[str, str]] = []
    for name, value in headers:
        if secret_name(name):
            value = redacted(value)
        elif name.lower() == "location":
            value = redact_url(value)
        out.append((name, value))
    return out


def redact_json(value: Any, *, fields: bool = True) -> Any:
    """A JSON value (``json.loads`` shapes) with the JSON rule of the module docstring applied.

    Args:
        value: dicts, lists, strings, numbers, booleans, ``None`` (tuples read as lists).
        fields: redact the string or number value of every member with a secret name
            (``False``: only the URL rule on strings).

    Returns:
        A new value; ``value`` itself (the same object) when nothing was redacted.

    """
    kind = type(value)
    if kind is str:
        if "://" in value and _ABSOLUTE_URL.fullmatch(value):
            shown = redact_url(value)
            return value if shown == value else shown
        return value
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        copy: dict[Any, Any] | None = None
        for key, item in value.items():
            if fields and isinstance(key, str) and _scalar(item) and secret_name(key):
                new = redacted(item)
            else:
                new = redact_json(item, fields=fields)
            if new is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = new
        return value if copy is None else copy
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            new = redact_json(item, fields=fields)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if isinstance(value, str):  # a str subclass (an enum member)
        return redact_json(str(value), fields=fields) if "://" in value else value
    return value


def _scalar(value: Any) -> bool:
    """Whether ``value`` is a string or a number (a bool is neither here)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def redact_body(body: bytes, media_type: str | None) -> bytes:
    """A request body as it may be stored: JSON and form bodies by this policy.

    Args:
        body: the exact body bytes.
        media_type: its ``Content-Type`` (parameters allowed), or ``None``.

    Returns:
        ``body`` itself when it holds nothing to redact. A JSON body (a ``json`` media
        type, or none and the bytes start with ``{``/``[``) that parses and holds a
        secret is re-encoded as compact UTF-8 JSON (``separators=(",", ":")``, member
        order kept) with :func:`redact_json` applied; an
        ``application/x-www-form-urlencoded`` body through :func:`redact_form`. Any
        other body, or one that does not decode or parse, is returned unchanged.

    """
    kind = (media_type or "").partition(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError:
            return body
        shown, changed = _pairs(text, "&", unquote_plus)
        return shown.encode("ascii") if changed else body
    if not (kind.endswith("json") or body.lstrip()[:1] in (b"{", b"[")):
        return body
    if not may_hold_secret(body):
        return body  # no secret name, URL or escape anywhere: nothing to parse for
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    shown_value = redact_json(parsed)
    if shown_value is parsed:
        return body
    return json.dumps(shown_value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )
