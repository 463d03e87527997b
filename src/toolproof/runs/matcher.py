"""The one replay matcher: recorded items served by key and occurrence; a miss as a diff.

An agent's frozen replay (``toolproof.replay_session``) and a cassette
(``toolproof.testing.Cassette``) serve what a run recorded through a :class:`Matcher`:
tool calls by ``(tool, canonical arguments)``, model turns by ``(source, match key)``
and reads by canonical request, each by occurrence (:meth:`Matcher.take`): the k-th
identical ask gets the k-th recorded item, counted in the order they were *asked* when
recorded (``asked_order``: the admission numbers of a session's steps,
:func:`~toolproof.runs.live.admission_sorted`), not the order answered.

A run's re-execution (``toolproof replay``, finalizing a session) asks by call id and
by step id, never by occurrence: :class:`~toolproof.runs.calls.FrozenCalls`,
:class:`~toolproof.runs.turns.RecordedTurns` and the ``read``/``prompt`` steps read the
recorded events of that id back from the trace through its index
(:class:`~toolproof.runs.traceindex.TraceIndex`, 8 bytes an event: nothing is held per
call), and explain an unrecorded call with :func:`changed_arguments`.

A miss is shown as a unified diff, recorded -> asked (:func:`diff`), of the next unserved
recorded item (:meth:`Matcher.first_pending`) or of the nearest recorded key
(:meth:`Matcher.nearest`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from typing import Any, Generic, TypeVar

__all__ = ["Matcher", "call_text", "changed_arguments", "diff"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_Item = tuple[int, V, str]
"""A recorded item under its key: its event index, the value, its step."""
_Order = Callable[[list[_Item[V]], Callable[[_Item[V]], str]], list[_Item[V]]]
_STEP = itemgetter(2)


class Matcher(Generic[K, V]):
    """Recorded items under keys, served by key and occurrence.

    Args:
        items: ``(key, index, value, step)`` in trace order: ``index`` is the recorded
            event index a refusal names, ``step`` the recorded step.
        asked_order: puts a key's items (trace order) in the order they were asked, given
            each item's step (:func:`~toolproof.runs.live.admission_sorted`); ``None``:
            trace order.
        end: the event index a refusal names when nothing recorded is left unserved.

    """

    def __init__(
        self,
        items: Iterable[tuple[K, int, V, str]] = (),
        *,
        asked_order: _Order[V] | None = None,
        end: int = 0,
    ) -> None:
        grouped: dict[K, list[tuple[int, V, str]]] = {}
        self._pending: dict[int, K] = {}
        for key, index, value, step in items:
            grouped.setdefault(key, []).append((index, value, step))
            self._pending[index] = key
        self._items: dict[K, list[tuple[int, V]]] = {
            key: [
                (index, value)
                for index, value, _ in (found if asked_order is None else asked_order(found, _STEP))
            ]
            for key, found in grouped.items()
        }
        self._taken: dict[K, int] = {}
        self.end = end

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        """How many items were recorded, all keys together."""
        return sum(len(found) for found in self._items.values())

    def keys(self) -> list[K]:
        """The recorded keys, each once, in the order first recorded."""
        return list(self._items)

    def recorded(self, key: K) -> int:
        """How many items were recorded under ``key``."""
        return len(self._items.get(key, ()))

    def taken(self, key: K) -> int:
        """How many items under ``key`` were served."""
        return self._taken.get(key, 0)

    @property
    def served(self) -> int:
        """Items served by :meth:`take`, all keys together."""
        return sum(self._taken.values())

    def take(self, key: K) -> V | None:
        """The next unserved item under ``key``, used up; ``None``: a miss (none, or all served)."""
        taken = self._taken.get(key, 0)
        found = self._items.get(key, ())
        if taken >= len(found):
            return None
        self._taken[key] = taken + 1
        index, value = found[taken]
        self._pending.pop(index, None)
        return value

    def first_pending(self) -> tuple[int, K] | None:
        """The first recorded item not served yet, as ``(event index, key)``; ``None``: none."""
        return next(iter(self._pending.items()), None)

    def nearest(
        self, asked: K, shown: Callable[[K], str], among: Callable[[K], bool] | None = None
    ) -> K | None:
        """The recorded key most like ``asked``, compared as ``shown`` lines.

        Args:
            asked: the key asked for.
            shown: a key as text (indented JSON: one value a line).
            among: the keys to consider first (a call's tool, a turn's source); when none
                of them was recorded, every key.

        Returns:
            The nearest key; ``None`` when nothing was recorded.

        """
        keys = [key for key in self._items if among is None or among(key)] or list(self._items)
        if not keys:
            return None
        lines = shown(asked).splitlines()

        def score(key: K) -> float:
            return difflib.SequenceMatcher(None, shown(key).splitlines(), lines).ratio()

        return max(keys, key=score)


def diff(recorded: str, asked: str) -> str:
    """A unified diff of ``recorded`` and ``asked`` (headed ``recorded``/``asked``)."""
    lines = difflib.unified_diff(
        recorded.splitlines(), asked.splitlines(), "recorded", "asked", lineterm=""
    )
    return "\n".join(lines)


def call_text(tool: str, canonical_arguments: bytes) -> str:
    """A tool call as a diff shows it: ``{"arguments", "tool"}`` as indented JSON."""
    arguments = json.loads(canonical_arguments)
    return json.dumps({"tool": tool, "arguments": arguments}, indent=2, sort_keys=True)


_SHORT_ARGUMENTS = 300
"""Up to this many characters, a changed call shows both argument objects whole."""


def _pointer_differences(before: Any, now: Any, at: str, out: list[str]) -> None:
    if len(out) >= 3:
        return
    if isinstance(before, dict) and isinstance(now, dict):
        for key in sorted(set(before) | set(now)):
            here = f"{at}/{str(key).replace('~', '~0').replace('/', '~1')}"
            _pointer_differences(before.get(key, _ABSENT), now.get(key, _ABSENT), here, out)
    elif isinstance(before, list) and isinstance(now, list) and len(before) == len(now):
        for index, (old, new) in enumerate(zip(before, now, strict=True)):
            _pointer_differences(old, new, f"{at}/{index}", out)
    elif before != now or type(before) is not type(now):
        out.append(f"{at or '/'}: recorded {_shown(before)}, now {_shown(now)}")


_ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "(absent)"})()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def changed_arguments(before: dict[str, Any], now: dict[str, Any]) -> str:
    """Both argument objects when short; else the first (up to 3) differing JSON pointers."""
    whole = f"{now} (recorded {before})"
    if len(whole) <= _SHORT_ARGUMENTS:
        return whole
    out: list[str] = []
    _pointer_differences(before, now, "", out)
    return "at " + "; ".join(out)
