"""Admitting a call to a live session: its step number, its arguments' snapshot, the room.

A session numbers its call steps (``call-00000001``) and model steps in the order they
were *admitted* (asked), and refuses a call it could not record before the body runs:
:meth:`~toolproof.runs.live.LiveRecording.admit` takes a snapshot of the arguments
(:func:`arguments_snapshot`) and asks :class:`Room` whether the filesystem has room for the call.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeVar

from toolproof.bundle.steps import numbered_step
from toolproof.contract.tools import ToolCall, ToolFailure
from toolproof.errors import ToolCallError
from toolproof.failures import FailureKind, FailureWhere
from toolproof.identity import canonical_json
from toolproof.runs.recorder import call_json

__all__ = [
    "ARGUMENTS_WRAPPER",
    "ROOM_INTERVAL",
    "ROOM_SLACK",
    "Admission",
    "Room",
    "admission_number",
    "admission_sorted",
    "arguments_snapshot",
    "is_flat",
    "step_id",
    "unrecordable",
]


def step_id(number: int) -> str:
    """The step id of the ``number``-th admitted call (from 1): ``call-00000001``."""
    return numbered_step("call", number)


_NUMBERED = re.compile(r"(?:call|turn)-([0-9]{8})")
_T = TypeVar("_T")


def admission_number(step: str) -> int | None:
    """The admission number a session gave step ``step``, or ``None`` if it has none.

    A session numbers its call steps (``call-00000007``: 7) and model steps
    (``turn-00000003``: 3) in the order they were admitted, that is asked; a run
    spec's own step ids (``read``, ``lookup``) have no such number.
    """
    matched = _NUMBERED.fullmatch(step)
    return int(matched.group(1)) if matched else None


def admission_sorted(items: Iterable[_T], step: Callable[[_T], str]) -> list[_T]:
    """``items`` (in trace order) in the order they were admitted, when all were numbered.

    Args:
        items: recorded calls or turns of one run, in the order the trace holds them
            (the order they were answered).
        step: the step id of an item.

    Returns:
        The items sorted by :func:`admission_number` when every item has one (a
        session's steps; before admission numbering, model steps were numbered as
        they were answered, so such a run keeps its trace order); otherwise the trace
        order unchanged (a run spec's steps).

    """
    listed = list(items)
    numbers = [admission_number(step(item)) for item in listed]
    if any(number is None for number in numbers):
        return listed
    order = sorted(range(len(listed)), key=lambda i: numbers[i] or 0)
    return [listed[i] for i in order]


class Admission(NamedTuple):
    """A call admitted for recording (returned by :meth:`LiveRecording.admit`).

    Immutable (a named tuple); ``admission._replace(step=...)`` makes a changed copy.

    Attributes:
        tool: the tool name.
        arguments: a copy of the arguments as admitted (the body may mutate its own).
        step: the step the call is recorded as (``call-00000001``), fixed at admission
            so the call id is known before the body runs (an ``approve`` layer binds
            its decision to it).
        recorded_id: the call id when :meth:`LiveRecording.admit` computed it for
            ``step``, else ``""`` (computed from the fields then).
        idempotency_key: the call's idempotency key (``idem_<hex>``,
            :mod:`toolproof.tools.idempotency`), else ``""``; the caller runs the call
            with it (``observe(..., idempotency_key=)``) and the record carries it.

    """

    tool: str
    arguments: dict[str, Any]
    step: str = ""
    recorded_id: str = ""
    idempotency_key: str = ""

    @property
    def call_id(self) -> str:
        """The id the call is recorded under (``call_<hex>``)."""
        if self.recorded_id:
            return self.recorded_id
        return str(call_json(self.tool, self.arguments, self.step)["id"])


_SCALARS = frozenset({str, int, bool, type(None)})
"""Argument values a flat snapshot copies as they are (``json.loads`` of their canonical
JSON gives them back equal: a float is not one, ``1.0`` comes back ``1``)."""
ARGUMENTS_WRAPPER = len(b'{"arguments":}')


def is_flat(arguments: Any) -> bool:
    """Whether ``arguments`` is a plain dict of scalars with no ``$ref`` key (no walk needed)."""
    if type(arguments) is not dict or "$ref" in arguments:
        return False
    scalars = _SCALARS
    return all(type(value) in scalars for value in arguments.values())


def arguments_snapshot(tool: str, arguments: Any, flat: bool) -> tuple[dict[str, Any], bytes]:
    """A copy of the arguments as admitted, and their canonical JSON.

    A flat dict (:func:`is_flat`) is copied as it is; anything else is parsed back from
    its canonical JSON (a deep copy the body cannot reach).

    Raises:
        ValidationError: ``arguments`` is not an object.
        CanonicalizationError: it has no canonical JSON form (the path starts
            ``$.arguments``).

    """
    if not isinstance(arguments, dict):
        ToolCall(tool=tool, arguments=arguments, step=step_id(1))  # the refusal
    # encoded inside its wrapper, so a refusal's path starts ``$.arguments``
    encoded = canonical_json({"arguments": arguments})[ARGUMENTS_WRAPPER - 1 : -1]
    return (dict(arguments) if flat else json.loads(encoded)), encoded


ROOM_INTERVAL = 0.01
"""Seconds a free-space reading (``statvfs(2)``) is reused for, at most."""
ROOM_SLACK = 64 * 1024 * 1024
"""Free bytes a reused reading must keep beyond what this session wrote since it was taken.

A reading is reused only while it was taken less than :data:`ROOM_INTERVAL` ago *and*
it leaves this much room after the bytes the session wrote since and the call's own
need; otherwise ``statvfs`` is asked again. So a filesystem with less than 64 MiB free
(the small tmpfs of the full-disk tests) is asked before every call, and a disk can
only be found full late if *other* writers fill more than 64 MiB of it within 10 ms.
"""


class Room:
    """The free-space check of a session, with ``statvfs(2)`` read at most every 10 ms.

    See :data:`ROOM_SLACK` for when a reading is reused.
    """

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._taken = float("-inf")
        self._free = 0
        self._limit = 0
        self._written = 0

    def room(self, written: int, needed: int) -> tuple[int, int]:
        """The filesystem's free bytes, and the room ``RLIMIT_FSIZE`` leaves the trace.

        Args:
            written: bytes the session wrote so far (trace and evidence).
            needed: bytes the call about to be admitted needs.

        Returns:
            ``(free, below_limit)`` in bytes; ``free`` is the last reading less what
            was written since when the reading is reused.

        Raises:
            OSError: ``statvfs`` failed.

        """
        now = time.monotonic()
        free = self._free - (written - self._written)
        if now - self._taken >= ROOM_INTERVAL or free - needed < ROOM_SLACK:
            stat = os.statvfs(self._directory)
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            self._free = free = stat.f_bavail * stat.f_frsize
            self._limit = sys.maxsize if limit == resource.RLIM_INFINITY else limit
            self._written, self._taken = written, now
        below_limit = sys.maxsize if self._limit == sys.maxsize else self._limit - written
        return free, below_limit


def unrecordable(tool: str, why: str, where: str = "runtime") -> ToolCallError:
    """The ``unrecordable`` failure of a call that cannot be recorded (``why`` says why)."""
    what = tool if " " in tool else f"call to {tool!r}"  # "resources/read 'uri'" as it is
    failure = ToolFailure(
        kind=FailureKind.UNRECORDABLE,
        message=f"{what} cannot be recorded: {why}",
        where=FailureWhere(where),
    )
    return ToolCallError(failure)
