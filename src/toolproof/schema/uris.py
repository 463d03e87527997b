"""URI resolution and comparison for the identifiers of a declared JSON Schema.

A schema names its resources with ``$id`` and points at them with ``$ref``; the limit
walker (:mod:`toolproof.schema.refs`) must resolve each reference to the resource the
validator resolves it to, or its counts describe another schema. jsonschema-rs
resolves identifiers as URIs (RFC 3986 section 5.2) against the default base
:data:`DEFAULT_BASE_URI` and compares them after normalization, so ``URN:L`` and
``urn:L``, ``%4C`` and ``L``, ``HTTP://Host:80/x`` and ``http://host/x`` name one
resource. :func:`normalize_uri` applies that normalization — and a little more, which
is safe: two identifiers merged here but not by the validator are refused as not
unique, never counted as one while the validator sees two.

Specs followed: RFC 3986 sections 5.2 (resolution) and 6.2.2-6.2.3 (syntax- and
scheme-based normalization), RFC 8141 section 3 (URN equivalence), RFC 3987 section
3.1 (a non-ASCII character is compared as its UTF-8 percent-encoding).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

__all__ = ["DEFAULT_BASE_URI", "DEFAULT_PORTS", "normalize_uri", "resolve_uri"]

DEFAULT_BASE_URI = "json-schema:///"
"""The base URI of a schema without a root ``$id``: jsonschema-rs's own (RFC 3986 5.1.4)."""

DEFAULT_PORTS: dict[str, str] = {
    "http": "80",
    "https": "443",
    "ws": "80",
    "wss": "443",
    "ftp": "21",
}
"""Schemes whose default port is dropped (RFC 3986 6.2.3; the ports of RFC 9110 4.2,
RFC 6455 3 and RFC 1738 3.2). Their empty path is ``/``."""

_URI_RE = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?")
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_KEEP = "!#$&'()*+,/:;=?@[]~-._%"
"""Characters a URI may hold as they are (reserved, unreserved and ``%``); any other is
percent-encoded as its UTF-8 bytes before comparison (RFC 3987 3.1)."""


def _split(uri: str) -> tuple[str | None, str | None, str, str | None, str | None]:
    uri, hash_mark, fragment = uri.partition("#")
    match = _URI_RE.match(uri)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query = match.groups()
    return scheme, authority, path, query, fragment if hash_mark else None


def _join(
    scheme: str | None, authority: str | None, path: str, query: str | None, fragment: str | None
) -> str:
    """Recompose the five components (RFC 3986 section 5.3); ``None`` leaves one out."""
    text = f"{scheme}:" if scheme is not None else ""
    if authority is not None:
        text += f"//{authority}"
    text += path
    if query is not None:
        text += f"?{query}"
    if fragment is not None:
        text += f"#{fragment}"
    return text


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: ``/a/b/../c/./d`` -> ``/a/c/d``."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        elif segment == ".":
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def resolve_uri(base: str, reference: str) -> str:
    """Resolve ``reference`` against ``base`` (RFC 3986 section 5.2.2, strict).

    Both are strings; the result keeps the spelling of its parts (compare results
    with :func:`normalize_uri`). Never raises: every string parses as a reference.
    """
    scheme, authority, path, query, fragment = _split(reference)
    if scheme is None:
        b_scheme, b_authority, b_path, b_query, _ = _split(base)
        scheme = b_scheme
        if authority is None:
            if not path:
                path = b_path
                query = b_query if query is None else query
            elif not path.startswith("/"):
                if b_authority is not None and not b_path:
                    path = "/" + path
                else:
                    path = b_path[: b_path.rfind("/") + 1] + path
            authority = b_authority
    path = remove_dot_segments(path)
    return _join(scheme, authority, path, query, fragment)


def _percent(text: str) -> str:
    """Encode what a URI may not hold; decode unreserved octets; upper-case the rest."""
    text = quote(text, safe=_KEEP)

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT_RE.sub(fix, text)


def normalize_uri(uri: str) -> str:
    """The form of an absolute URI that identifiers are compared in.

    RFC 3986 section 6.2.2: scheme and host in lower case; percent-encoded unreserved
    characters decoded and every other percent-encoding in upper-case hex (a character
    a URI may not hold is first encoded as UTF-8, RFC 3987 3.1); dot segments removed.
    Section 6.2.3 for the schemes of :data:`DEFAULT_PORTS`: the default port (and an
    empty one) dropped, an empty path made ``/``. RFC 8141 for ``urn:``: the namespace
    identifier in lower case, r-, q- and f-components not compared.

    Args:
        uri: an absolute URI (``HTTP://Host:80/a/./b#frag``); the fragment is kept,
            normalized the same way.

    Returns:
        The normalized URI (``http://host/a/b#frag``); ``json-schema:///`` keeps its
        empty authority.

    """
    scheme, authority, path, query, fragment = _split(uri)
    scheme = scheme.lower() if scheme is not None else None
    path = remove_dot_segments(_percent(path))
    query = _percent(query) if query is not None else None
    fragment = _percent(fragment) if fragment is not None else None
    if authority is not None:
        authority = _authority(scheme, authority)
        if not path and scheme in DEFAULT_PORTS:
            path = "/"
    if scheme == "urn":
        nid, colon, nss = path.partition(":")
        path = _lower(nid) + colon + nss
        if query is not None and query[:1] in ("+", "="):
            query = None  # RFC 8141 section 3: r- and q-components do not count
        fragment = None
    return _join(scheme, authority, path, query, fragment)


def _lower(text: str) -> str:
    """``Ex%3a`` -> ``ex%3A``: letters in lower case, percent-encodings in upper case."""
    return _PERCENT_RE.sub(lambda hit: hit.group(0).upper(), text.lower())


def _authority(scheme: str | None, authority: str) -> str:
    """``User@Host:80`` -> ``User@host`` for ``http``: host lower case, default port gone."""
    try:
        parts = urlsplit(f"//{authority}")
        port = parts.port
    except ValueError:  # not a host and port (a bad IP literal, a port past 65535)
        return _percent(authority)
    userinfo, at, _ = authority.rpartition("@")
    host = _lower(_percent(parts.hostname or ""))
    if ":" in host:  # an IPv6 literal loses its brackets in urlsplit
        host = f"[{host}]"
    text = _percent(userinfo) + at + host
    default = DEFAULT_PORTS.get(scheme or "")
    if port is not None and str(port) != default:
        text += f":{port}"
    return text
