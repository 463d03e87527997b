"""A live session's header (``session.json``): read, or refused naming the file and the rule.

The recorder writes ``session.json`` first in a live directory (``{"config", "pid",
"process", "started_at", "task"}``, :mod:`toolproof.runs.live`): finalizing,
recovering and resuming the session read it to tell whether its recorder still runs
and when it started. A header that is not a JSON object (torn by a crash while it was
written, or edited) is refused with one line naming the file and the rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolproof.contract.layout import SESSION_FILE
from toolproof.errors import InputError

__all__ = ["HEADER_RULE", "header_problem", "read_header", "read_object"]

HEADER_RULE = (
    f"{SESSION_FILE} holds a JSON object, the header its recorder writes first; replace it "
    "with {} to recover the session without it, or move the directory aside"
)
"""Why a live directory's header is refused (:func:`read_header`)."""


_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_KINDS[type(None)] = "null"


def header_problem(live: Path) -> str | None:
    """Why ``live``'s ``session.json`` is no header (``not JSON``...), ``None`` when it is one."""
    return read_object(Path(live) / SESSION_FILE)[1]


def read_header(live: Path) -> dict[str, Any]:
    """The JSON object in ``live``'s ``session.json``.

    Raises:
        InputError: it cannot be read, is not JSON or is not an object; the one-line
            message names the file and :data:`HEADER_RULE`.

    """
    path = Path(live) / SESSION_FILE
    value, reason = read_object(path)
    if value is not None:
        return value
    raise InputError(f"{path}: {reason} (rule: {HEADER_RULE})", path=str(path))


def read_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object in the file ``path`` and ``None``, or ``None`` and why it is none.

    The reason is one phrase: the ``OSError``'s text, ``not JSON``, or ``a JSON array,
    not an object`` (and so on for the other JSON values). Raises nothing.
    """
    try:
        value = json.loads(path.read_bytes())
    except OSError as exc:
        return None, exc.strerror or "cannot be read"
    except (ValueError, RecursionError):  # torn mid-write, or not the recorder's
        return None, "not JSON"
    if isinstance(value, dict):
        return value, None
    return None, f"a JSON {_KINDS.get(type(value), 'value')}, not an object"
