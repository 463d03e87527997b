"""``create_app``: the runs HTTP API as a FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI

from toolproof.adapters.http.approvals import approvals_router
from toolproof.adapters.http.guards import BodyLimit
from toolproof.adapters.http.problems import install_problem_handlers
from toolproof.adapters.http.rebinding import HostGuard, loopback_names
from toolproof.adapters.http.routes import public, router
from toolproof.adapters.http.settings import ApiSettings
from toolproof.adapters.http.tokens import BearerGuard, NamedBearerGuard
from toolproof.version import __version__

__all__ = ["APPROVALS_PREFIX", "PUBLIC_PATHS", "create_app"]

APPROVALS_PREFIX = "/v1/approvals"
"""Where the approval channel lives; only named approver tokens are served there."""

PUBLIC_PATHS = frozenset(
    {"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
"""Paths served without a token: the health check and the OpenAPI documents."""

DESCRIPTION = """\
Create, inspect, verify and replay toolproof runs stored under one artifact root.

Every endpoint but `/v1/health` needs `Authorization: Bearer <token>` (the token is
configured with `--token-file` or `TOOLPROOF_API_TOKEN`), checked before the body is
read. On a loopback address, a `Host` or `Origin` that does not name the bound address
is refused (421 / 403: DNS-rebinding protection). Request bodies larger than
the configured limit are refused with 413; run ids must match `^run_[0-9a-f]{64}$`;
every path the API touches is confined to the artifact root. Errors answer a
`Problem` document.

`/v1/approvals` is the approval channel of gated tools (`--approvals-store FILE`): it
takes only the named approver tokens of `--approvers FILE`, never the runs token, and
records each decision under the token's name.
"""


def create_app(settings: ApiSettings, *, public_paths: frozenset[str] = frozenset()) -> FastAPI:
    """Build the FastAPI app serving ``settings.root``.

    Args:
        settings: root, token and limits (see :class:`ApiSettings`).
        public_paths: paths served without a token besides :data:`PUBLIC_PATHS` (the
            viewer's pages, which hold no run data).

    Returns:
        The ASGI app; its OpenAPI document is at ``/openapi.json``, docs at ``/docs``.
        On a loopback ``settings.host`` it answers only requests whose ``Host`` and
        ``Origin`` name that address and ``settings.port``
        (:class:`~toolproof.adapters.http.rebinding.HostGuard`).

    """
    app = FastAPI(
        title="toolproof runs API",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    install_problem_handlers(app, settings.root)
    app.include_router(public)
    app.include_router(router)
    app.include_router(approvals_router)
    # Middleware added last runs first: Host/Origin, the runs token, the approver tokens
    # (under /v1/approvals instead of the runs token), then the body limit.
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(NamedBearerGuard, prefix=APPROVALS_PREFIX, tokens=settings.approvers)
    if not settings.auth_disabled and settings.token is not None:
        app.add_middleware(
            BearerGuard,
            token=settings.token,
            public=PUBLIC_PATHS | public_paths,
            delegated=(APPROVALS_PREFIX,),
        )
    names = loopback_names(settings.host, settings.port)
    if names is not None:
        app.add_middleware(HostGuard, names=names)
    return app
