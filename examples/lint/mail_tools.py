"""A mail tool from another source, which a weather tool's description names."""

from __future__ import annotations

import toolproof


@toolproof.tool
def send_mail(to: str, body: str) -> str:
    """Send a mail."""
    return f"sent to {to}"
