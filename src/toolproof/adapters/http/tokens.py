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
import tomllib
from collections.abc import Mapping
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from toolproof.adapters.http.rebinding import loopback_address
from toolproof.errors import AuthenticationError, InputError, error_mapping

__all__ = [
    "CLIENT_STATE",
    "MIN_TOKEN_CHARS",
    "BearerGuard",
    "ClientBearerGuard",
    "NamedBearerGuard",
    "bearer_problem",
    "is_loopback",
    "load_named_tokens",
    "named_bearer",
    "resolve_token",
    "unauthorized_body",
]

MIN_TOKEN_CHARS = 16
"""A token shorter than this is refused: it would be guessable."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, any spelling).

    Names (``localhost``) never are: what they resolve to is not ours to trust.
    """
    return loopback_address(host) is not None


_TOKEN68 = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
"""RFC 6750 §2.1 ``b64token``: what ``Authorization: Bearer`` can carry."""


def _check_token(token: str, source: str) -> None:
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
    _check_token(token, source)
    return token


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")


def load_named_tokens(path: Path, option: str = "--approvers") -> dict[str, str]:
    """Read a file of named bearer tokens: TOML, one ``NAME = "TOKEN"`` per line.

    The name is who a request carrying the token acts as (an approver's decision is
    recorded under it; a served client's calls are decided for ``Agent::NAME``); names
    match ``^[A-Za-z0-9_.-]{1,64}$``; each token follows the rules of
    :func:`resolve_token` and is used by one name only. ``option`` is the command-line
    option that named the file, for the messages.

    Returns:
        ``{name: token}`` in file order.

    Raises:
        InputError: the file cannot be read or is not TOML, a value is not a string, a
            name or token breaks its rule, two names share a token, or it names none.

    """
    where = f"{option} {str(path)!r}"
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(
            f"{where}: cannot read named tokens from it ({exc})", path=str(path)
        ) from exc
    owners: dict[str, str] = {}
    for name, token in table.items():
        if not _NAME.match(name):
            raise InputError(
                f"{where}: token name {name!r} must match ^[A-Za-z0-9_.-]{{1,64}}$", path=str(path)
            )
        if not isinstance(token, str):
            raise InputError(f"{where}: {name} must be a string token", path=str(path))
        _check_token(token, f"{where} ({name})")
        if token in owners:
            raise InputError(
                f"{where}: {owners[token]} and {name} have the same token "
                "(rule: a token names one person)",
                path=str(path),
            )
        owners[token] = name
    if not owners:
        raise InputError(f"{where}: the file names no token", path=str(path))
    return {name: token for token, name in owners.items()}


def named_bearer(authorization: str | None, tokens: Mapping[str, str]) -> str:
    """The name of the token an ``Authorization: Bearer`` header carries.

    Every token is compared (in constant time), so the time taken does not tell which
    name matched or how much of a token was right.

    Raises:
        AuthenticationError: no bearer header, or its token is none of ``tokens``.

    """
    scheme, _, given = (authorization or "").partition(" ")
    if not authorization or scheme.lower() != "bearer":
        raise AuthenticationError("missing bearer token (Authorization: Bearer ...)")
    offered = given.strip().encode("utf-8")
    found = None
    for name, token in tokens.items():
        if hmac.compare_digest(offered, token.encode("utf-8")):
            found = name
    if found is None:
        raise AuthenticationError("wrong bearer token")
    return found


def unauthorized_body(message: str) -> bytes:
    """The JSON problem of a 401, its status and code from :func:`error_mapping`."""
    mapping = error_mapping(AuthenticationError(message))
    problem = {"status": mapping.http_status, "error": mapping.code, "message": message}
    return json.dumps({**problem, "fields": {}}).encode("utf-8")


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
        delegated: path prefixes whose requests the app authenticates itself, with
            tokens of its own (``/v1/approvals``: named approver tokens); this token
            is not checked there.

    """

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        public: frozenset[str] = frozenset(),
        delegated: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.token = token
        self.public = public
        self.delegated = delegated

    def _guarded(self, path: str) -> bool:
        if path in self.public:
            return False
        return not any(path == p or path.startswith(p + "/") for p in self.delegated)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; HTTP requests without the token get a 401."""
        if scope["type"] == "http" and self._guarded(str(scope.get("path", ""))):
            headers = dict(scope.get("headers", []))
            raw = headers.get(b"authorization")
            problem = bearer_problem(raw.decode("latin-1") if raw else None, self.token)
            if problem is not None:
                body = unauthorized_body(problem)
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
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, message: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": unauthorized_body(message)})


class NamedBearerGuard:
    """ASGI middleware: requests under ``prefix`` must carry one of the named ``tokens``.

    Like :class:`BearerGuard` it answers 401 before the app reads the body. The app
    authenticates the request again (:func:`named_bearer`) to learn the name.

    Args:
        app: the ASGI app.
        prefix: the guarded path prefix (``/v1/approvals``: the path and below it).
        tokens: ``{name: token}``; empty: every request under ``prefix`` is refused.

    """

    def __init__(self, app: ASGIApp, prefix: str, tokens: Mapping[str, str]) -> None:
        self.app = app
        self.prefix = prefix
        self.tokens = dict(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; guarded HTTP requests without a named token get a 401."""
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and (path == self.prefix or path.startswith(self.prefix + "/")):
            raw = dict(scope.get("headers", [])).get(b"authorization")
            try:
                if not self.tokens:
                    raise AuthenticationError(
                        "this server takes no approver tokens: start it with --approvers FILE "
                        "(the runs API token cannot decide approvals)"
                    )
                named_bearer(raw.decode("latin-1") if raw else None, self.tokens)
            except AuthenticationError as exc:
                await _refuse(send, exc.message)
                return
        await self.app(scope, receive, send)


CLIENT_STATE = "toolproof.client"
"""The key of ``scope["state"]`` under which :class:`ClientBearerGuard` leaves the name of
the client a request's token belongs to (read back from the Starlette request's state)."""


class ClientBearerGuard:
    """ASGI middleware: every HTTP request carries one of the named client ``tokens``.

    A request without one gets the 401 of :class:`BearerGuard` before its body is read;
    one with a token goes on with the token's name in ``scope["state"][CLIENT_STATE]``
    (a copy of the scope and its state: nothing shared between requests is changed), so
    what serves it knows who is calling (``toolproof serve --clients``).

    Args:
        app: the ASGI app to guard (every HTTP request).
        tokens: ``{name: token}`` (:func:`load_named_tokens`); not empty.

    """

    def __init__(self, app: ASGIApp, tokens: Mapping[str, str]) -> None:
        self.app = app
        self.tokens = dict(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; an HTTP request without a named token gets a 401."""
        if scope["type"] == "http":
            raw = dict(scope.get("headers", [])).get(b"authorization")
            try:
                name = named_bearer(raw.decode("latin-1") if raw else None, self.tokens)
            except AuthenticationError as exc:
                await _refuse(send, exc.message)
                return
            scope = {**scope, "state": {**scope.get("state", {}), CLIENT_STATE: name}}
        await self.app(scope, receive, send)
