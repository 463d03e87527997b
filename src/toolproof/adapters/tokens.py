"""Bearer tokens for toolproof's HTTP servers: where they come from, and an ASGI guard.

Used by ``toolproof serve --http`` (MCP over streamable HTTP, ``TOOLPROOF_MCP_TOKEN``)
and ``toolproof serve-api`` (``TOOLPROOF_API_TOKEN``). A server bound to a host that is
not loopback must have a token; tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
import os
import re
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from toolproof.adapters.rebinding import loopback_address
from toolproof.errors import InputError

__all__ = ["MIN_TOKEN_CHARS", "BearerGuard", "bearer_problem", "is_loopback", "resolve_token"]

MIN_TOKEN_CHARS = 16
"""A token shorter than this is refused: it would be guessable."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, any spelling).

    Names (``localhost``) never are: what they resolve to is not ours to trust.
    """
    return loopback_address(host) is not None


_TOKEN68 = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
"""RFC 6750 §2.1 ``b64token``: what ``Authorization: Bearer`` can carry."""


def resolve_token(token: str | None, token_file: Path | None, env: str) -> str | None:
    """The bearer token: ``token``, else ``token_file``'s first line, else ``$env``.

    Returns:
        The token, or ``None`` when none is configured anywhere.

    Raises:
        InputError: the token file cannot be read, or the token is blank, holds a
            character outside RFC 6750's ``b64token`` (whitespace included), or is
            shorter than 16 characters.

    """
    source = "--token"
    if token is None and token_file is not None:
        source = f"--token-file {str(token_file)!r}"
        try:
            line = token_file.read_text(encoding="utf-8").splitlines()[0]
        except (OSError, IndexError, UnicodeDecodeError) as exc:
            raise InputError(
                f"--token-file {str(token_file)!r}: cannot read a token from it ({exc})",
                path=str(token_file),
            ) from exc
        token = line.strip() or line  # a blank line stays blank, and is refused below
    if token is None:
        source = f"${env}"
        token = os.environ.get(env)
        if token == "":
            token = None  # an empty variable is the same as an unset one
    if token is None:
        return None
    if not token.strip():
        raise InputError(
            f"the bearer token from {source} is blank ({len(token)} whitespace characters): "
            f"a token is at least {MIN_TOKEN_CHARS} characters of A-Z a-z 0-9 - . _ ~ + / "
            f"(RFC 6750), e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    if not _TOKEN68.match(token):
        raise InputError(
            f"the bearer token from {source} holds a character a Bearer header cannot carry "
            "(whitespace or a control character, or outside A-Z a-z 0-9 - . _ ~ + / and "
            "trailing =; RFC 6750 §2.1)"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise InputError(
            f"the bearer token from {source} is {len(token)} characters long; "
            f"use at least {MIN_TOKEN_CHARS} (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`)"
        )
    return token


def bearer_problem(authorization: str | None, token: str) -> str | None:
    """Why an ``Authorization`` header does not carry ``token``, or ``None`` when it does."""
    scheme, _, given = (authorization or "").partition(" ")
    if not authorization or scheme.lower() != "bearer":
        return "missing bearer token (Authorization: Bearer ...)"
    if not hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8")):
        return "wrong bearer token"
    return None


class BearerGuard:
    """ASGI middleware: answer 401 (JSON, ``WWW-Authenticate: Bearer``) without the token.

    It runs before the app reads anything: a request without the token is refused
    before its body is parsed (a non-JSON body gets 401, not 400).

    Args:
        app: the ASGI app to guard (every HTTP request).
        token: the bearer token every request must carry.
        public: request paths served without a token (``/v1/health``).

    """

    def __init__(self, app: ASGIApp, token: str, public: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.token = token
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; HTTP requests without the token get a 401."""
        if scope["type"] == "http" and scope.get("path") not in self.public:
            headers = dict(scope.get("headers", []))
            raw = headers.get(b"authorization")
            problem = bearer_problem(raw.decode("latin-1") if raw else None, self.token)
            if problem is not None:
                body = json.dumps(
                    {"status": 401, "error": "unauthorized", "message": problem, "fields": {}}
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode("utf-8")})
                return
        await self.app(scope, receive, send)
