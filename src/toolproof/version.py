"""The version of toolproof: a leaf module every adapter may import (it imports nothing)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
"""The package version (the ``version`` of ``pyproject.toml``)."""
