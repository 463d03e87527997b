"""How an error from outside toolproof reads in one line: user code at import, pydantic.

:func:`foreign_failure` names what importing user code raised (an exit included);
:func:`validation_problem` is the one formatter of a pydantic ``ValidationError``'s first
problem that every error message uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

__all__ = ["FOREIGN_CODE_ERRORS", "ValidationProblem", "foreign_failure", "validation_problem"]


FOREIGN_CODE_ERRORS = (Exception, SystemExit, KeyboardInterrupt)
"""What importing or loading user code (a tool module, an extension or plugin entry point)
may raise and must be reported as a load error naming the module, never pass through:
a ``sys.exit()`` at import would end the process silently (exit code 3, 130...)."""


def foreign_failure(exc: BaseException) -> str:
    """``"RuntimeError: database is down"``; for an exit, ``"SystemExit(3): ..."``.

    Args:
        exc: what importing user code raised (one of :data:`FOREIGN_CODE_ERRORS`).

    Returns:
        One line naming the exception type and its message.

    """
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the module called sys.exit() while being imported"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt: the import was interrupted (SIGINT or a raise)"
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class ValidationProblem:
    """The first problem of a pydantic ``ValidationError``, in the pieces messages use.

    Attributes:
        loc: the location as pydantic gives it (``("python", 0, "module")``).
        where: ``loc`` dotted (``python.0.module``), or the fallback when it is empty.
        message: pydantic's message as is (``Field required``).
        rule: the message without pydantic's ``Value error, `` prefix.
        kind: pydantic's error type (``missing``, ``extra_forbidden``...).

    """

    loc: tuple[str | int, ...]
    where: str
    message: str
    rule: str
    kind: str


def validation_problem(
    exc: ValidationError, *, empty: str = "", prefer: str | None = None
) -> ValidationProblem:
    """The first problem of ``exc`` (the one formatter every error message uses).

    Args:
        exc: the pydantic validation error.
        empty: ``where`` when the location is empty (the document itself).
        prefer: an error type to report first when present (``extra_forbidden``: an
            unknown key explains a "missing" one next to it, a typo).

    Returns:
        The :class:`ValidationProblem`.

    """
    errors = exc.errors(include_url=False)
    first = next((e for e in errors if e["type"] == prefer), errors[0]) if prefer else errors[0]
    loc = tuple(first["loc"])
    message = str(first["msg"])
    if first["type"] == "tuple_type":  # a tuple is a Python model's list: TOML and JSON say list
        message = "Input should be a valid list"
    return ValidationProblem(
        loc=loc,
        where=".".join(str(part) for part in loc) or empty,
        message=message,
        rule=message.removeprefix("Value error, "),
        kind=str(first["type"]),
    )
