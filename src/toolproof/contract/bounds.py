"""Bounded numbers for configuration keys: durations in seconds and counts.

Every numeric key of ``toolproof.toml`` (``[[mcp]] startup_timeout``, extension and
backend configs) uses one of these types, so an absurd value — ``nan``, ``inf``,
``1e308``, a negative or zero duration — is refused when the file is loaded, with a
message naming the rule, instead of overflowing a timer later. The limits are stated
in ``docs/mcp.md`` and ``docs/extensions.md``.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator

__all__ = [
    "DEFAULT_SEGMENT_CALLS",
    "MAX_COUNT",
    "MAX_MESSAGE_BYTES",
    "MAX_RATE",
    "MAX_SECONDS",
    "MIN_MESSAGE_BYTES",
    "STDIO_MESSAGE_BYTES",
    "Delay",
    "MessageBytes",
    "Rate",
    "Seconds",
    "limit_note",
]

MAX_SECONDS = 7 * 24 * 3600
"""The longest duration any key accepts: 604800 seconds (7 days)."""
MAX_COUNT = 1_000_000_000
"""The largest count a key without a smaller limit accepts (entries, burst)."""
MAX_RATE = 1_000_000.0
"""The largest rate accepted, per second."""
STDIO_MESSAGE_BYTES = 32 * 1024 * 1024
"""The default longest JSON-RPC message on an MCP stdio stream: 33554432 bytes (32 MiB),
one line without its newline (``[[mcp]] max_message_bytes``, ``[serve] max_message_bytes``)."""
DEFAULT_SEGMENT_CALLS = 2000
"""Steps per segment of a recorded session unless told otherwise (``[serve]
segment_calls``, ``record_session(segment_calls=)``; ``0``: one run), chosen so one
segment's finalize stays well under 256 MB (docs/runs.md "Segments")."""
MIN_MESSAGE_BYTES = 1024
"""The smallest message limit a key accepts (1 KiB)."""
MAX_MESSAGE_BYTES = 1024 * 1024 * 1024
"""The largest message limit a key accepts (1 GiB)."""


def _seconds(value: float) -> float:
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise ValueError(
            f"{value!r} is not a duration: seconds must be a finite number above 0 "
            f"and at most {MAX_SECONDS} (7 days)"
        )
    return value


def _delay(value: float) -> float:
    if not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(
            f"{value!r} is not a delay: seconds must be a finite number from 0 "
            f"to {MAX_SECONDS} (7 days)"
        )
    return value


def _rate(value: float) -> float:
    if not math.isfinite(value) or not 0 < value <= MAX_RATE:
        raise ValueError(
            f"{value!r} is not a rate: per second, a finite number above 0 and at most {MAX_RATE:g}"
        )
    return value


def _message_bytes(value: int) -> int:
    if not MIN_MESSAGE_BYTES <= value <= MAX_MESSAGE_BYTES:
        raise ValueError(
            f"{value!r} is not a message limit: bytes, from {MIN_MESSAGE_BYTES} (1 KiB) to "
            f"{MAX_MESSAGE_BYTES} (1 GiB)"
        )
    return value


Seconds = Annotated[float, AfterValidator(_seconds)]
"""A duration in seconds: finite, above 0, at most :data:`MAX_SECONDS`."""
Delay = Annotated[float, AfterValidator(_delay)]
"""A wait in seconds: finite, from 0 to :data:`MAX_SECONDS`."""
Rate = Annotated[float, AfterValidator(_rate)]
"""Events per second: finite, above 0, at most 1e6."""
MessageBytes = Annotated[int, AfterValidator(_message_bytes)]
"""A message size limit in bytes: from 1 KiB to 1 GiB."""


def limit_note(limit: int, key: str) -> str:
    """``"32 MiB, [serve] max_message_bytes"``: a byte limit in round units, and its key."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit % size == 0:
            return f"{limit // size} {unit}, {key}"
    return key
