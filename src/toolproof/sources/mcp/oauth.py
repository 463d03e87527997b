"""OAuth 2.1 for ``[[mcp]]`` servers over streamable HTTP: the SDK's client, a 0600 token file.

An ``[mcp.auth]`` table makes the client authorize through the official SDK's OAuth
support (``mcp.client.auth``), which follows the MCP authorization spec: the server's
401 and ``WWW-Authenticate``, its protected-resource metadata, the authorization
server's metadata (its ``issuer`` checked against ``issuer`` when given), RFC 8707
resource indicators, and a new token when one expires. toolproof supports the
``client_credentials`` grant (a machine client with an id and a secret): no person is
involved. The secret is read from an environment variable at connect time and never
written anywhere.

Tokens (and the client's registration) are kept in one JSON file per server,
``0600`` in a ``0700`` folder (default ``$TOOLPROOF_CACHE/mcp-tokens`` or
``~/.cache/toolproof/mcp-tokens``), written whole through a temporary file and a
rename. No token reaches a run, a log line, a span or an error message.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["McpAuth", "OAuthSetupError", "TokenFile", "default_token_path", "oauth_provider"]

TOKEN_FILE_MODE = 0o600
"""Owner read/write only: the token file."""
TOKEN_DIR_MODE = 0o700
"""Owner only: the folder of the token files."""


class OAuthSetupError(Exception):
    """The ``[mcp.auth]`` of a server cannot be used (a missing secret, say)."""


@dataclass(frozen=True)
class McpAuth:
    """How a client authorizes with one streamable-HTTP server (a resolved ``[mcp.auth]``).

    Attributes:
        client_id: the OAuth client id.
        client_secret_env: the environment variable holding the client secret (the
            secret itself is never in the config, a repr or a message).
        issuer: the authorization server's issuer identifier the credentials belong
            to; the flow stops if the server's metadata names another. ``None``: the
            one discovery finds.
        scope: space-separated scopes to ask for, or ``None``.
        token_file: the token file (absolute path).

    """

    client_id: str
    client_secret_env: str
    token_file: str
    issuer: str | None = None
    scope: str | None = None


def default_token_path(name: str, url: str) -> Path:
    """The default token file of server ``name`` at ``url`` (one file per name and URL)."""
    env = os.environ.get("TOOLPROOF_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "toolproof"
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return base / "mcp-tokens" / f"{name}-{key}.json"


class TokenFile(TokenStorage):
    """The SDK's ``TokenStorage`` over one JSON file, ``0600``.

    Args:
        path: the file; its folder is created ``0700`` when missing.

    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            stored = json.loads(text)
        except ValueError:  # a torn or foreign file: start over (nothing is quoted)
            return {}
        return stored if isinstance(stored, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        stored = self._read()
        stored[key] = value
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

    async def get_tokens(self) -> OAuthToken | None:
        """The stored tokens, or ``None``."""
        stored = self._read().get("tokens")
        return OAuthToken.model_validate(stored) if isinstance(stored, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Store ``tokens`` (the file is replaced whole, ``0600``)."""
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, or ``None``."""
        stored = self._read().get("client")
        if not isinstance(stored, dict):
            return None
        return OAuthClientInformationFull.model_validate(stored)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store the client registration (its secret is not kept: it comes from the env)."""
        info = client_info.model_dump(mode="json", exclude_none=True)
        info.pop("client_secret", None)
        self._write("client", info)


def oauth_provider(auth: McpAuth, url: str) -> tuple[Any, str]:
    """The SDK's ``httpx`` auth for ``url`` (a client-credentials provider), and the secret.

    The secret is returned so the caller can keep it out of any message it writes.

    Raises:
        OAuthSetupError: the ``client_secret_env`` variable is not set or empty, the
            token file is a directory, or the issuer is not an http(s) URL.

    """
    secret = os.environ.get(auth.client_secret_env, "")
    if not secret:
        raise OAuthSetupError(
            f"auth.client_secret_env: the environment variable {auth.client_secret_env!r} "
            "is not set (rule: the client secret comes from the environment)"
        )
    if Path(auth.token_file).is_dir():
        raise OAuthSetupError(
            f"auth.token_file: {auth.token_file} is a directory (rule: the token file is "
            "a file, relative to the toml file; its folder is made when missing)"
        )
    try:
        provider = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=TokenFile(Path(auth.token_file)),
            client_id=auth.client_id,
            client_secret=secret,
            scope=auth.scope,
            issuer=auth.issuer,
        )
    except ValueError as exc:  # the SDK checks the issuer's form
        raise OAuthSetupError(f"auth.issuer: {exc}") from None
    return provider, secret
