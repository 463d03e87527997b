"""Request guards: the body size limit, the bearer token, run ids and confined paths."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolproof.adapters.http.problems import ApiProblem, problem_response
from toolproof.adapters.http.settings import ApiSettings
from toolproof.adapters.http.tokens import bearer_problem
from toolproof.bundle.paths import confine
from toolproof.errors import InputError

__all__ = ["RUN_ID_PATTERN", "BodyLimit", "RunId", "require_token", "run_directory"]

RUN_ID_PATTERN = r"^run_[0-9a-f]{64}$"
"""A run id as the API accepts it: ``run_`` and 64 lowercase hex digits (nothing else)."""

RunId = Annotated[
    str,
    PathParam(
        pattern=RUN_ID_PATTERN,
        min_length=68,
        max_length=68,
        description="A run id: `run_` and 64 lowercase hex digits.",
        examples=["run_" + "0" * 64],
    ),
]


class BodyLimit:
    """ASGI middleware: answer 413 to a request whose body is larger than ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before anything is read; a body
    without one (chunked) is read up to the limit and refused as soon as it passes
    it. An accepted body is handed on as it arrived, so at most ``limit`` bytes are
    held per request.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self, size: str) -> Any:
        return problem_response(
            ApiProblem(
                413,
                "body-too-large",
                f"the request body is {size} bytes; the limit is {self.limit} bytes",
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection (HTTP bodies are checked; other scopes pass)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._too_large(value.decode())(scope, receive, send)
                return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._too_large(f"more than {self.limit}")(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            if chunks:
                return chunks.pop(0)
            return await receive()

        await self.app(scope, replay, send)


_bearer = HTTPBearer(auto_error=False, description="The API token (`TOOLPROOF_API_TOKEN`).")


def settings_of(request: Request) -> ApiSettings:
    """The :class:`ApiSettings` of the app serving ``request``."""
    settings: ApiSettings = request.app.state.settings
    return settings


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Refuse (401) a request without the configured bearer token (compared in constant time).

    Raises:
        ApiProblem: 401, with ``WWW-Authenticate: Bearer``.

    """
    settings = settings_of(request)
    if settings.auth_disabled:
        return
    header = f"{credentials.scheme} {credentials.credentials}" if credentials else None
    problem = bearer_problem(header, settings.token or "")
    if problem is not None:
        raise ApiProblem(401, "unauthorized", problem)


def run_directory(settings: ApiSettings, run_id: str) -> Path:
    """The directory of run ``run_id``, confined to the artifact root.

    Raises:
        ApiProblem: 404 when no such run exists (or its path leaves the root).

    """
    try:
        path = confine(settings.root, f"runs/{run_id}", what="run")
    except InputError:
        raise ApiProblem(
            404, "run-not-found", f"no run {run_id!r} under the artifact root"
        ) from None
    if not path.is_dir():
        raise ApiProblem(404, "run-not-found", f"no run {run_id!r} under the artifact root")
    return path
