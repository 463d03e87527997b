"""The ``toolproof`` command line."""

from toolproof.adapters.cli.app import app, main

__all__ = ["app", "main"]
