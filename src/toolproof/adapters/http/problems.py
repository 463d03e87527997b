"""Error answers of the runs HTTP API: one JSON shape; status and code from ``error_mapping``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from toolproof.adapters.server_paths import ServerPaths
from toolproof.errors import ToolproofError, error_mapping

__all__ = ["ApiProblem", "Problem", "install_problem_handlers", "problem_response"]


class Problem(BaseModel):
    """Every error answer of the API.

    Attributes:
        status: the HTTP status, repeated.
        error: a stable error code: a toolproof error's
            :attr:`toolproof.errors.ErrorMapping.code` (``config``, ``verification``,
            ``replay-refused``...), or the API's own (``unauthorized``, ``invalid-request``,
            ``body-too-large``...).
        message: what went wrong, naming the thing and the rule.
        fields: structured detail (``path``, ``rule``, validation ``errors``...).

    """

    status: int
    error: str
    message: str
    fields: dict[str, Any] = Field(default_factory=dict)


class ApiProblem(Exception):
    """Raise to answer a :class:`Problem`."""

    def __init__(self, status: int, error: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.problem = Problem(status=status, error=error, message=message, fields=fields)


def problem_response(problem: ApiProblem) -> JSONResponse:
    """The JSON response of ``problem`` (with ``WWW-Authenticate`` on a 401)."""
    headers = {"WWW-Authenticate": "Bearer"} if problem.problem.status == 401 else None
    return JSONResponse(
        problem.problem.model_dump(mode="json"), status_code=problem.problem.status, headers=headers
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)


def _public(problem: ApiProblem, paths: ServerPaths) -> ApiProblem:
    """``problem`` with no absolute server path in its message or string fields."""
    answer = problem.problem
    hidden = _hidden(answer.fields, paths)
    return ApiProblem(answer.status, answer.error, paths.hide(answer.message), **hidden)


def _hidden(value: Any, paths: ServerPaths) -> Any:
    if isinstance(value, str):
        return paths.hide(value)
    if isinstance(value, list):
        return [_hidden(item, paths) for item in value]
    if isinstance(value, dict):
        return {key: _hidden(item, paths) for key, item in value.items()}
    return value


def install_problem_handlers(app: FastAPI, root: Path | None = None) -> None:
    """Answer every error (ours, validation, routing) as a :class:`Problem`.

    Args:
        app: the FastAPI app.
        root: the artifact root; a message or field naming a path under it (or under
            another server location) reads ``<root>/...`` instead
            (:mod:`toolproof.adapters.server_paths`).

    """
    paths = ServerPaths([(root, "<root>")] if root is not None else [])

    async def api_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiProblem)
        return problem_response(_public(exc, paths))

    async def toolproof_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ToolproofError)
        mapping = error_mapping(exc)
        problem = ApiProblem(
            mapping.http_status, mapping.code, exc.message, **_jsonable(exc.fields)
        )
        return problem_response(_public(problem, paths))

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": [str(part) for part in error["loc"]], "msg": str(error["msg"])}
            for error in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(first["loc"])
        return problem_response(
            ApiProblem(422, "invalid-request", f"{where}: {first['msg']}", errors=errors)
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return problem_response(ApiProblem(exc.status_code, "http", str(exc.detail)))

    app.add_exception_handler(ApiProblem, api_problem)
    app.add_exception_handler(ToolproofError, toolproof_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
