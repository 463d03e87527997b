"""The runs HTTP API (extra ``toolproof[http]``): FastAPI, served by ``toolproof serve-api``.

``create_app`` (and with it FastAPI) is imported on first access only: the CLI and
``serve`` use this package's token and loopback helpers, which must work in a plain
install without the ``[http]`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from toolproof.adapters.http.settings import TOKEN_ENV, ApiSettings

if TYPE_CHECKING:
    from toolproof.adapters.http.app import create_app

__all__ = ["TOKEN_ENV", "ApiSettings", "create_app"]


def __getattr__(name: str) -> object:
    """``create_app``, imported from :mod:`toolproof.adapters.http.app` on first access.

    Raises ``AttributeError`` for any other name, and ``ModuleNotFoundError`` naming
    ``fastapi`` when the ``[http]`` extra is not installed.
    """
    if name == "create_app":
        return importlib.import_module("toolproof.adapters.http.app").create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
