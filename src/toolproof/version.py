"""The version of toolproof: a leaf module every adapter may import (it imports nothing)."""

__all__ = ["__version__", "install_hint"]

__version__ = "0.1.0"
"""The package version (the ``version`` of ``pyproject.toml``)."""


def install_hint(extra: str) -> str:
    """How to install one optional extra, as every "needs its extra" message says it.

    toolproof is not published on a package index yet, so the extra is installed from a
    clone of the repository (README, "Installing"), pinned by its ``constraints.txt``.

    Args:
        extra: the extra's name as ``pyproject.toml`` spells it, e.g. ``"http"``.

    Returns:
        ``"pip install -e '.[http]' -c constraints.txt in a clone of toolproof (...)"``.
    """
    return (
        f"pip install -e '.[{extra}]' -c constraints.txt in a clone of toolproof "
        "(it is not on PyPI yet; README, Installing)"
    )
