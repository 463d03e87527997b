"""``[mcp.auth]``: OAuth 2.1 for a streamable-HTTP ``[[mcp]]`` server (docs/mcp.md, *OAuth*).

:class:`McpAuthTable` is the table as written; :func:`resolve_auth` turns it into the
source's :class:`~toolproof.sources.mcp.oauth.McpAuth` (paths made absolute, the default
token file chosen). The SDK is imported only when a server is resolved.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

if TYPE_CHECKING:
    from toolproof.sources.mcp.oauth import Authorizer, McpAuth

__all__ = ["McpAuthTable", "resolve_auth"]


class McpAuthTable(BaseModel):
    """``[mcp.auth]``: how the client authorizes with one streamable-HTTP server.

    ``grant``: ``authorization_code`` (a person logs in once with ``toolproof mcp
    login``; the default unless ``client_secret_env`` is given) or ``client_credentials``
    (a machine: ``client_id`` and ``client_secret_env`` required). ``client_secret_env``
    names the environment variable holding a secret (never the secret itself);
    ``client_metadata_url`` is the https URL of the client's metadata document (its
    ``client_id`` where the server supports CIMD); ``token_file`` (relative to the toml
    file) defaults to one file per server under ``$TOOLPROOF_CACHE/mcp-tokens``.

    Validated with the context ``{"base": <the toml file's folder>}`` (as
    :func:`~toolproof.config.schema.load_config` does), a ``token_file`` that is an existing
    directory is refused too.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    grant: Literal["authorization_code", "client_credentials"] | None = None
    client_id: str | None = Field(default=None, min_length=1)
    client_secret_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    client_metadata_url: str | None = None
    client_name: str = Field(default="toolproof", min_length=1)
    issuer: str | None = None
    scope: str | None = None
    token_file: str | None = None
    redirect_port: int | None = Field(default=None, ge=1, le=65535, strict=True)

    @model_validator(mode="after")
    def _forms(self, info: ValidationInfo) -> Self:
        if self.token_file is not None and (not self.token_file or "\x00" in self.token_file):
            raise ValueError(
                f"'token_file' must be a file path (not empty, no NUL character), got "
                f"{self.token_file!r}"
            )
        base = info.context.get("base") if isinstance(info.context, dict) else None
        if self.token_file is not None and isinstance(base, Path):
            path = (base / self.token_file).resolve()
            if path.is_dir():
                raise ValueError(
                    f"'token_file' {path} is a directory (rule: the token file is a file, "
                    "relative to the toml file; its folder is made when missing)"
                )
        url = self.client_metadata_url
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme != "https" or not parts.netloc or parts.path in ("", "/"):
                raise ValueError(
                    "'client_metadata_url' must be an https URL with a path (the client's "
                    f"metadata document), got {url!r}"
                )
        if self.issuer is not None:
            parts = urlsplit(self.issuer)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(
                    "'issuer' must be the authorization server's http(s) issuer URL, got "
                    f"{self.issuer!r}"
                )
        return self

    @model_validator(mode="after")
    def _grant_needs(self) -> Self:
        machine = self.grant == "client_credentials" or (
            self.grant is None and self.client_secret_env is not None
        )
        if machine:
            if self.client_id is None or self.client_secret_env is None:
                raise ValueError(
                    "client_credentials needs 'client_id' and 'client_secret_env' "
                    "(a machine client has an id and a secret)"
                )
            for key in ("client_metadata_url", "redirect_port"):
                if key in self.model_fields_set:
                    raise ValueError(f"{key!r} applies to grant = 'authorization_code'")
        elif self.scope is not None:
            raise ValueError(
                "'scope' applies to grant = 'client_credentials' (a person's grant asks for "
                "the scopes the server names)"
            )
        return self


def resolve_auth(
    table: McpAuthTable, name: str, url: str, base: Path, authorizer: Authorizer | None = None
) -> McpAuth:
    """The :class:`McpAuth` of server ``name`` at ``url``; paths relative to ``base``.

    ``authorizer`` completes a grant the server asks for during a load (``None``: nobody).
    """
    from toolproof.sources.mcp.oauth import McpAuth, default_token_path

    token_file = (
        (base / table.token_file).resolve()
        if table.token_file is not None
        else default_token_path(name, url)
    )
    return McpAuth(
        client_id=table.client_id,
        client_secret_env=table.client_secret_env,
        token_file=str(token_file),
        issuer=table.issuer,
        scope=table.scope,
        grant=table.grant,
        client_metadata_url=table.client_metadata_url,
        client_name=table.client_name,
        redirect_port=table.redirect_port,
        server=name,
        authorizer=authorizer,
    )
