"""OAuth 2.1 for ``[[mcp]]`` servers over streamable HTTP: the SDK's clients, a 0600 token file.

An ``[mcp.auth]`` table makes the client authorize through the official SDK's OAuth
support (``mcp.client.auth``), which follows the MCP authorization spec: the server's
401 and ``WWW-Authenticate``, its protected-resource metadata (RFC 9728), the
authorization server's metadata (RFC 8414, its ``issuer`` checked), RFC 8707 resource
indicators, refresh, and a scope step-up on ``403 insufficient_scope``. Two grants:

* ``authorization_code`` (a person): PKCE, the client identified by a Client ID
  Metadata Document (``client_metadata_url``) when the server supports it, else by
  dynamic registration (RFC 7591), or pre-registered (``client_id``); the RFC 9207
  ``iss`` of the redirect is checked. A person logs in once with ``toolproof mcp
  login`` (:mod:`toolproof.sources.mcp.login`); loads then use and refresh the stored
  tokens and ask nobody unless an :class:`Authorizer` is given.
* ``client_credentials`` (a machine): an id and a secret, no person.

A secret is read from an environment variable at connect time and never written.
Tokens (and a dynamic registration) are kept in one JSON file per server, ``0600`` in
a ``0700`` folder (default ``$TOOLPROOF_CACHE/mcp-tokens`` or
``~/.cache/toolproof/mcp-tokens``), written whole through a temporary file and a
rename. No token reaches a run, a log line, a span or an error message.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import is_valid_client_metadata_url, issuers_match
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPDeprecationWarning

__all__ = [
    "AUTHORIZATION_CODE",
    "CLIENT_CREDENTIALS",
    "Authorizer",
    "LoginRequired",
    "McpAuth",
    "OAuthSetupError",
    "TokenFile",
    "callback_result",
    "default_token_path",
    "oauth_provider",
]

TOKEN_FILE_MODE = 0o600
"""Owner read/write only: the token file."""
TOKEN_DIR_MODE = 0o700
"""Owner only: the folder of the token files."""
AUTHORIZATION_CODE = "authorization_code"
logger = logging.getLogger("toolproof.mcp")

CLIENT_CREDENTIALS = "client_credentials"
UNUSED_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI a load without an :class:`Authorizer` names (it never redirects)."""


class OAuthSetupError(Exception):
    """The ``[mcp.auth]`` of a server cannot be used (a missing secret, say)."""


class LoginRequired(OAuthSetupError):
    """The server needs a person to authorize and nobody is there to ask."""


class Authorizer(Protocol):
    """Who completes an authorization-code grant: a person's browser, or a test.

    ``redirect_uri`` is where the authorization server sends the browser back (a
    loopback ``http://127.0.0.1:PORT/callback`` for a person, RFC 8252 section 7.3).
    :meth:`authorize` gets the authorization URL (PKCE challenge, ``state``,
    ``resource`` and ``scope`` already in it) and returns the full URL the browser was
    redirected to (with ``code``, ``state`` and, RFC 9207, ``iss``).
    """

    @property
    def redirect_uri(self) -> str:
        """The registered redirect URI."""
        ...

    async def authorize(self, url: str) -> str:
        """Have ``url`` authorized; the redirect URL it led to."""
        ...


@dataclass(frozen=True)
class McpAuth:
    """How a client authorizes with one streamable-HTTP server (a resolved ``[mcp.auth]``).

    Attributes:
        client_id: the OAuth client id: required for ``client_credentials``; for
            ``authorization_code`` a pre-registered client (else CIMD or dynamic
            registration).
        client_secret_env: the environment variable holding the client secret (the
            secret itself is never in the config, a repr or a message).
        token_file: the token file (absolute path).
        issuer: the authorization server's issuer identifier the client belongs to; the
            flow stops if discovery leads to another. ``None``: the one discovery finds.
        scope: ``client_credentials``: space-separated scopes to ask for, or ``None``
            (``authorization_code`` asks for the scopes the server names: its challenge,
            else its metadata; the MCP scope selection the SDK follows).
        grant: ``authorization_code`` or ``client_credentials``; ``None``: see
            :attr:`flow`.
        client_metadata_url: the https URL of this client's Client ID Metadata Document,
            used as its ``client_id`` where the server supports it.
        client_name: the name a dynamic registration gives.
        redirect_port: the loopback port of the redirect URI ``toolproof mcp login``
            listens on (``None``: the one the stored registration names, else any).
        server: the ``[[mcp]]`` name (for the login hint in messages).
        authorizer: who authorizes when the server asks during a load (``None``: nobody;
            the stored tokens are used and refreshed, a new grant needs ``mcp login``).
        fresh: a new grant is being made (``mcp login``): the stored tokens are not
            used, and stay in the file, untouched, until the exchange gives new ones.
        refusals: why a grant the server asked for after connecting could not be made
            (appended as it happens; the SDK's flow then ends the connection, and the
            call's failure names the last one).

    """

    client_id: str | None = None
    client_secret_env: str | None = None
    token_file: str = ""
    issuer: str | None = None
    scope: str | None = None
    grant: str | None = None
    client_metadata_url: str | None = None
    client_name: str = "toolproof"
    redirect_port: int | None = None
    server: str = ""
    authorizer: Authorizer | None = field(default=None, compare=False, repr=False)
    fresh: bool = False
    refusals: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def flow(self) -> str:
        """The grant: ``grant``, else ``client_credentials`` when a secret is configured."""
        if self.grant is not None:
            return self.grant
        return CLIENT_CREDENTIALS if self.client_secret_env else AUTHORIZATION_CODE

    def login_hint(self) -> str:
        """The rule of a missing login, naming the command."""
        return (
            "rule: a person authorizes once with toolproof mcp login "
            f"{self.server or 'NAME'} --config FILE; loads reuse and refresh the tokens"
        )


def default_token_path(name: str, url: str) -> Path:
    """The default token file of server ``name`` at ``url`` (one file per name and URL)."""
    env = os.environ.get("TOOLPROOF_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "toolproof"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return base / "mcp-tokens" / f"{name}-{key}.json"


def callback_result(url: str) -> AuthorizationCodeResult:
    """The ``code``, ``state`` and ``iss`` of the redirect URL an authorization led to.

    Raises:
        OAuthSetupError: the redirect carries an ``error`` (RFC 6749 section 4.1.2.1:
            named with its ``error_description``) or no ``code``.

    """
    query = {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
    if "error" in query:
        described = f" ({query['error_description']})" if "error_description" in query else ""
        raise OAuthSetupError(
            f"the authorization server refused: {query['error']}{described} "
            "(rule: RFC 6749 section 4.1.2.1)"
        )
    if not query.get("code"):
        raise OAuthSetupError(
            "the redirect carries no code (rule: an authorization-code redirect has ?code=)"
        )
    return AuthorizationCodeResult(
        code=query["code"], state=query.get("state"), iss=query.get("iss")
    )


class TokenFile(TokenStorage):
    """The SDK's ``TokenStorage`` over one JSON file, ``0600``.

    Args:
        path: the file; its folder is created ``0700`` when missing.
        client: a configured (pre-registered) client, returned instead of a stored
            registration; its secret is never written.
        issuer: the issuer the configuration names: a registration bound to another
            authorization server is refused before anything is authorized.
        secret_from_env: the client secret comes from the environment: a registration
            is stored without it.
        fresh: a new grant is being made: the stored tokens are not handed to the SDK
            (the file keeps them until :meth:`set_tokens` replaces them).

    """

    def __init__(
        self,
        path: Path,
        client: OAuthClientInformationFull | None = None,
        issuer: str | None = None,
        *,
        secret_from_env: bool = True,
        fresh: bool = False,
    ) -> None:
        self.path = path
        self.fresh = fresh
        self.client = client
        self.issuer = issuer
        self.secret_from_env = secret_from_env

    def read(self) -> dict[str, Any]:
        """The file's JSON object (``{}`` when missing, torn or foreign: see :meth:`problem`)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError:
            return {}
        try:
            stored = json.loads(text)
        except ValueError:  # a torn or foreign file: start over (nothing is quoted)
            return {}
        return stored if isinstance(stored, dict) else {}

    def problem(self) -> str | None:
        """Why the file that exists is not a token file (no content quoted), or ``None``."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            return "not UTF-8 text"
        try:
            stored = json.loads(text)
        except ValueError as exc:
            return f"not JSON: line {getattr(exc, 'lineno', 1)}"
        return None if isinstance(stored, dict) else "not a JSON object"

    def write(self, stored: dict[str, Any]) -> None:
        """Replace the file whole with ``stored`` (``0600``, through a temporary file)."""
        folder = self.path.parent
        folder.mkdir(mode=TOKEN_DIR_MODE, parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".tokens-", suffix=".json", dir=folder)
        try:
            os.fchmod(handle, TOKEN_FILE_MODE)
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(stored, file)
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise

    def _put(self, key: str, value: dict[str, Any] | None) -> None:
        stored = self.read()
        if value is None:
            stored.pop(key, None)
        else:
            stored[key] = value
        self.write(stored)

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, or ``None`` (always ``None`` while :attr:`fresh`)."""
        if self.fresh:
            return None
        stored = self.read().get("tokens")
        return OAuthToken.model_validate(stored) if isinstance(stored, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store ``tokens`` and when they expire (the file is replaced whole, ``0600``)."""
        stored = self.read()
        stored["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        stored.pop("expires_at", None)
        if tokens.expires_in is not None:
            stored["expires_at"] = time.time() + tokens.expires_in
        self.write(stored)
        self.fresh = False

    def expires_at(self) -> float | None:
        """When the stored access token expires (Unix seconds), or ``None`` (not said)."""
        if self.fresh:
            return None
        value = self.read().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    def stored_client(self) -> OAuthClientInformationFull | None:
        """The stored registration (CIMD or dynamic), or ``None``."""
        stored = self.read().get("client")
        if not isinstance(stored, dict):
            return None
        return OAuthClientInformationFull.model_validate(stored)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The configured client, else the stored registration, else ``None``."""
        return self.client or self.stored_client()

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store a registration (a secret from the environment is never kept).

        Raises:
            OAuthSetupError: ``issuer`` is configured and the registration is bound to
                another authorization server.

        """
        bound = client_info.issuer
        if self.issuer is not None and bound is not None and not issuers_match(bound, self.issuer):
            raise OAuthSetupError(
                f"auth.issuer: the server's authorization server is {bound}, not "
                f"{self.issuer} (rule: the client authorizes only with the configured issuer)"
            )
        info = client_info.model_dump(mode="json", exclude_none=True)
        if self.secret_from_env:
            info.pop("client_secret", None)
        self._put("client", info)


def _secret(auth: McpAuth) -> str:
    if auth.client_secret_env is None:
        return ""
    secret = os.environ.get(auth.client_secret_env, "")
    if not secret:
        raise OAuthSetupError(
            f"auth.client_secret_env: the environment variable {auth.client_secret_env!r} "
            "is not set (rule: the client secret comes from the environment)"
        )
    return secret


def _check_issuer(issuer: str | None) -> None:
    if issuer is not None and urlsplit(issuer).scheme not in ("http", "https"):
        raise OAuthSetupError(
            f"auth.issuer: issuer must be the authorization server's http(s) issuer URL, "
            f"got {issuer!r}"
        )


def _code_provider(auth: McpAuth, url: str, secret: str) -> OAuthClientProvider:
    """The SDK's authorization-code provider (PKCE, CIMD/DCR, refresh, step-up)."""
    _check_issuer(auth.issuer)
    metadata_url = auth.client_metadata_url
    if metadata_url is not None and not is_valid_client_metadata_url(metadata_url):
        raise OAuthSetupError(
            "auth.client_metadata_url: client_metadata_url must be a valid HTTPS URL with a "
            f"non-root pathname, got: {metadata_url}"
        )
    authorizer = auth.authorizer
    path = Path(auth.token_file)
    known = TokenFile(path).stored_client()
    if authorizer is not None:
        redirect = authorizer.redirect_uri
    elif known is not None and known.redirect_uris:
        redirect = str(known.redirect_uris[0])
    else:
        redirect = UNUSED_REDIRECT
    client = None
    if auth.client_id is not None:  # pre-registered: never registered again
        client = OAuthClientInformationFull(
            client_id=auth.client_id,
            client_secret=secret or None,
            redirect_uris=[redirect],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            issuer=auth.issuer,
        )
    storage = TokenFile(path, client, auth.issuer, secret_from_env=bool(secret), fresh=auth.fresh)
    problem = storage.problem()
    if authorizer is None and problem is not None:
        raise LoginRequired(
            f"auth: token file {path} is not valid ({problem}): log in again ({auth.login_hint()})"
        )
    if authorizer is None and not storage.read().get("tokens"):
        raise LoginRequired(f"auth: no token for this server yet ({auth.login_hint()})")
    metadata = OAuthClientMetadata(
        redirect_uris=[redirect],  # type: ignore[list-item]
        client_name=auth.client_name,
        grant_types=[AUTHORIZATION_CODE, "refresh_token"],
    )
    landed: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        if authorizer is None:
            refusal = f"auth: the server asks for a new authorization ({auth.login_hint()})"
            auth.refusals.append(refusal)
            raise LoginRequired(refusal)
        landed.append(await authorizer.authorize(authorization_url))

    async def callback_handler() -> AuthorizationCodeResult:
        return callback_result(landed.pop())

    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=metadata_url,
    )
    # the SDK loads stored tokens without their expiry: an expired one is refreshed
    # (not sent, refused, and re-authorized) only when the provider knows it expired
    provider.context.token_expiry_time = storage.expires_at()
    return provider


def oauth_provider(auth: McpAuth, url: str) -> tuple[Any, str]:
    """The SDK's ``httpx`` auth for ``url`` (per :attr:`McpAuth.flow`), and the secret.

    The secret (``""`` when none) is returned so the caller can keep it out of any
    message it writes.

    Raises:
        OAuthSetupError: the ``client_secret_env`` variable is not set or empty, the
            token file is a directory, the issuer is not an http(s) URL, or the client
            metadata URL is not an https URL with a path.
        LoginRequired: ``authorization_code`` with no stored token and no
            :attr:`McpAuth.authorizer`.

    """
    secret = _secret(auth)
    if Path(auth.token_file).is_dir():
        raise OAuthSetupError(
            f"auth.token_file: {auth.token_file} is a directory (rule: the token file is "
            "a file, relative to the toml file; its folder is made when missing)"
        )
    if auth.flow == AUTHORIZATION_CODE:
        return _code_provider(auth, url, secret), secret
    if auth.client_id is None or not secret:
        raise OAuthSetupError(
            "auth: client_credentials needs client_id and client_secret_env "
            "(rule: a machine client has an id and a secret)"
        )
    if auth.issuer is None:  # the SDK warns with its own file and line: one clear line instead
        logger.warning(
            "MCP server %r: auth.issuer is not set: the server decides which authorization "
            "server receives the client credentials (set issuer so they go only there)",
            auth.server,
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            provider = ClientCredentialsOAuthProvider(
                server_url=url,
                storage=TokenFile(Path(auth.token_file), issuer=auth.issuer),
                client_id=auth.client_id,
                client_secret=secret,
                scope=auth.scope,
                issuer=auth.issuer,
            )
    except ValueError as exc:  # the SDK checks the issuer's form
        raise OAuthSetupError(f"auth.issuer: {exc}") from None
    return provider, secret
