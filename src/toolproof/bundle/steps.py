"""The ids of a session's numbered steps: ``call-00000001``, ``turn-00000001``, ``read-...``."""

from __future__ import annotations

__all__ = ["numbered_step"]


def numbered_step(kind: str, number: int) -> str:
    """The id of the ``number``-th step of ``kind`` a session numbers (from 1).

    Args:
        kind: ``call``, ``turn``, ``read`` or ``prompt``.
        number: the step's number (admission order for calls and turns).

    Returns:
        ``<kind>-<number as 8 digits>``: ``numbered_step("call", 1)`` is ``call-00000001``.

    """
    return f"{kind}-{number:08d}"
