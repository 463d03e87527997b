"""Settings of the runs HTTP API: artifact root, token, limits."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from toolproof.errors import InputError

__all__ = ["TOKEN_ENV", "ApiSettings", "is_loopback", "resolve_token"]

TOKEN_ENV = "TOOLPROOF_API_TOKEN"
"""The environment variable that holds the API's bearer token."""

MIN_TOKEN_CHARS = 16
"""A token shorter than this is refused: it would be guessable."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``); names never are."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None, token_file: Path | None) -> str | None:
    """The bearer token: ``token``, else ``token_file``'s first line, else the environment.

    The environment variable is :data:`TOKEN_ENV` (``TOOLPROOF_API_TOKEN``).

    Returns:
        The token, or ``None`` when none is configured anywhere.

    Raises:
        InputError: the token file cannot be read, or the token is shorter than 16 characters.

    """
    if token is None and token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, IndexError, UnicodeDecodeError) as exc:
            raise InputError(
                f"--token-file {str(token_file)!r}: cannot read a token from it ({exc})",
                path=str(token_file),
            ) from exc
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InputError(
            f"the API token is {len(token)} characters long; "
            f"use at least {MIN_TOKEN_CHARS} (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`)"
        )
    return token


@dataclass(frozen=True)
class ApiSettings:
    """How the runs HTTP API is served.

    Attributes:
        root: the artifact root; runs live in ``<root>/runs/<run_id>`` and every path
            the API reads or writes is confined to it.
        token: the bearer token every request (but ``/v1/health`` and the OpenAPI
            documents) must carry; ``None`` only with ``auth_disabled``.
        auth_disabled: serve without a token (allowed only on a loopback host).
        host: the host the API is bound to (checked against ``auth_disabled``).
        max_body_bytes: the largest request body accepted (bytes); larger is a 413.
        max_response_bytes: the largest document or trace page answered (bytes).
        max_page: the largest ``limit`` of a paged listing.

    Raises:
        InputError: no token and auth not disabled, or auth disabled on a host that
            is not loopback.

    """

    root: Path
    token: str | None = None
    auth_disabled: bool = False
    host: str = "127.0.0.1"
    max_body_bytes: int = 1024 * 1024
    max_response_bytes: int = 16 * 1024 * 1024
    max_page: int = 1000

    def __post_init__(self) -> None:
        if self.auth_disabled and not is_loopback(self.host):
            raise InputError(
                "--no-auth is only allowed on a loopback host (127.0.0.1 or ::1), "
                f"not {self.host!r}",
                host=self.host,
            )
        if not self.auth_disabled and self.token is None:
            raise InputError(
                f"the HTTP API needs a bearer token: pass --token-file FILE or set {TOKEN_ENV} "
                "(or --no-auth on 127.0.0.1/::1)"
            )
        if self.max_body_bytes <= 0 or self.max_response_bytes <= 0 or self.max_page <= 0:
            raise InputError("the API's size and page limits must be positive")
