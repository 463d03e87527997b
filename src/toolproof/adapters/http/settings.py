"""Settings of the runs HTTP API: artifact root, token, limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolproof.adapters.http.tokens import is_loopback
from toolproof.adapters.http.tokens import resolve_token as resolve_bearer
from toolproof.config import run_registries
from toolproof.errors import InputError
from toolproof.runs.registries import RunRegistries

__all__ = ["TOKEN_ENV", "ApiSettings", "is_loopback", "resolve_token"]

TOKEN_ENV = "TOOLPROOF_API_TOKEN"
"""The environment variable that holds the API's bearer token."""


def resolve_token(token: str | None, token_file: Path | None) -> str | None:
    """The API's bearer token: ``token``, else ``token_file``'s first line, else the environment.

    The environment variable is :data:`TOKEN_ENV` (``TOOLPROOF_API_TOKEN``); see
    :func:`toolproof.adapters.http.tokens.resolve_token`.

    Raises:
        InputError: the token file cannot be read, or the token is shorter than 16 characters.

    """
    return resolve_bearer(token, token_file, TOKEN_ENV)


@dataclass(frozen=True)
class ApiSettings:
    """How the runs HTTP API is served.

    Attributes:
        root: the artifact root; runs live in ``<root>/runs/<run_id>`` and every path
            the API reads or writes is confined to it.
        token: the bearer token every request (but ``/v1/health`` and the OpenAPI
            documents) must carry; ``None`` only with ``auth_disabled``.
        auth_disabled: serve without a token (allowed only on a loopback host).
        host: the host the API is bound to (checked against ``auth_disabled``); on a
            loopback address only requests whose ``Host``/``Origin`` name it are served.
        port: the port it is bound to (``None``: requests naming any port are served).
        max_body_bytes: the largest request body accepted (bytes); larger is a 413.
        max_response_bytes: the largest document or trace page answered (bytes).
        max_page: the largest ``limit`` of a paged listing.
        approvals_store: the approvals store (SQLite) ``/v1/approvals`` reads and
            decides in; ``None``: those endpoints answer 404.
        approvers: ``{name: token}`` of the people who may use ``/v1/approvals`` (the
            name is recorded as who decided); the runs token is never one of them.
        registries: where the reasoner, check and runtime names of the runs it creates,
            verifies and replays resolve (:func:`toolproof.config.run_registries` by
            default: the built-ins and the installed entry points); an application
            registers its own plugins into the value it passes.

    Raises:
        InputError: no token and auth not disabled, or auth disabled on a host that
            is not loopback.

    """

    root: Path
    token: str | None = None
    auth_disabled: bool = False
    host: str = "127.0.0.1"
    port: int | None = None
    max_body_bytes: int = 1024 * 1024
    max_response_bytes: int = 16 * 1024 * 1024
    max_page: int = 1000
    approvals_store: Path | None = None
    approvers: Mapping[str, str] = field(default_factory=dict)
    registries: RunRegistries = field(default_factory=run_registries)

    def __post_init__(self) -> None:
        if self.auth_disabled and not is_loopback(self.host):
            raise InputError(
                "--no-auth is only allowed on a loopback address (127.0.0.0/8 or ::1), "
                f"not {self.host!r}",
                host=self.host,
            )
        if not self.auth_disabled and self.token is None:
            raise InputError(
                f"the HTTP API needs a bearer token: pass --token-file FILE or set {TOKEN_ENV} "
                "(or --no-auth on a loopback address)"
            )
        if self.token is not None and self.token in self.approvers.values():
            raise InputError(
                "the runs API token is also an approver token: give approvers tokens of "
                "their own (rule: the runs token cannot decide approvals)"
            )
        if self.max_body_bytes <= 0 or self.max_response_bytes <= 0 or self.max_page <= 0:
            raise InputError("the API's size and page limits must be positive")
