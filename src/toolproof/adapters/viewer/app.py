"""``create_viewer_app``: the runs HTTP API, read-only, with the viewer's pages in front.

The viewer is plain HTML, CSS and JavaScript served from the package (no build step,
no CDN). Its pages read runs only through the API's own endpoints (``/v1/runs``,
``/v1/runs/{id}``, ``…/trace``, ``…/files/…``, ``…/verify``, ``/v1/diff``), so what it
shows is exactly what the API serves: there is no second reader of run directories.

Read-only: every request that could change the artifact root (creating a run,
replaying one into a scratch directory) is refused with 405; ``verify`` (a pure check)
and reads are served. Host/Origin (DNS rebinding) and bearer-token rules are the API's
own (:func:`toolproof.adapters.http.create_app`): on a loopback address the viewer may
run without a token, elsewhere a token is required, and the pages send it from the
URL fragment ``#token=…`` (kept in the tab's ``sessionStorage``, never in a URL the
server sees).
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from toolproof.adapters.http import ApiSettings, create_app

__all__ = ["STATIC_DIR", "VIEWER_PUBLIC_PATHS", "create_viewer_app"]

STATIC_DIR = Path(__file__).parent / "static"
"""The viewer's pages (``index.html``, ``viewer.js``, ``viewer.css``)."""

VIEWER_PUBLIC_PATHS = frozenset(
    {"/", "/static/index.html", "/static/viewer.js", "/static/viewer.css"}
)
"""The pages served without a token (they hold no run data: the data comes from the API)."""

_WRITES_ALLOWED = ("/verify",)
"""POST endpoints the read-only viewer serves: verification reads and checks, nothing else."""


class ReadOnly:
    """ASGI middleware: refuse (405) every request but GET/HEAD and POST ``…/verify``.

    Args:
        app: the ASGI app to guard.

    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection; writes get a 405 problem document."""
        if scope["type"] == "http":
            method = scope.get("method", "GET")
            path = str(scope.get("path", ""))
            allowed = method in ("GET", "HEAD") or (
                method == "POST" and path.startswith("/v1/runs/") and path.endswith(_WRITES_ALLOWED)
            )
            if not allowed:
                body = json.dumps(
                    {
                        "status": 405,
                        "error": "read_only",
                        "message": f"the viewer is read-only: {method} {path} is not served",
                        "fields": {"method": method, "path": path},
                    }
                ).encode("utf-8")
                await send(
                    {
                        "type": "http.response.start",
                        "status": 405,
                        "headers": [
                            (b"content-type", b"application/problem+json"),
                            (b"allow", b"GET, HEAD"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def create_viewer_app(settings: ApiSettings) -> FastAPI:
    """Build the viewer: the runs API over ``settings.root``, read-only, plus its pages.

    Args:
        settings: root, token (``None`` with ``auth_disabled`` on loopback), host and
            port — the same settings as ``serve-api``.

    Returns:
        The ASGI app: pages at ``/`` and ``/static/``, the API at ``/v1``.

    """
    app = create_app(settings, public_paths=VIEWER_PUBLIC_PATHS)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    app.add_middleware(ReadOnly)
    return app
