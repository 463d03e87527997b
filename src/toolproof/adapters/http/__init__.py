"""The runs HTTP API (extra ``toolproof[http]``): FastAPI, served by ``toolproof serve-api``."""

from toolproof.adapters.http.app import create_app
from toolproof.adapters.http.settings import TOKEN_ENV, ApiSettings

__all__ = ["TOKEN_ENV", "ApiSettings", "create_app"]
