"""The run viewer: a read-only web UI over the runs HTTP API (``toolproof view``)."""

from toolproof.adapters.viewer.app import STATIC_DIR, create_viewer_app

__all__ = ["STATIC_DIR", "create_viewer_app"]
