"""A progress bar on stderr for long reads (``toolproof verify``), on a terminal only.

The bar appears once the work has taken :data:`SHOW_AFTER_SECONDS`; a shorter run
prints nothing, and output that is not a terminal (a pipe, ``--json`` consumers,
CI logs) never gets one. It is transient: it disappears when the work ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = ["SHOW_AFTER_SECONDS", "byte_progress"]

SHOW_AFTER_SECONDS = 1.0
"""How long the work runs before the bar appears."""


class _Bar:
    """Counts bytes; shows a rich bar once :data:`SHOW_AFTER_SECONDS` have passed."""

    def __init__(self, console: Console, description: str) -> None:
        self.console = console
        self.description = description
        self.started = time.monotonic()
        self.done = 0
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, count: int, total: int) -> None:
        self.done += count
        if self.progress is None:
            if time.monotonic() - self.started < SHOW_AFTER_SECONDS:
                return
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.description, total=total)
        assert self.task is not None
        self.progress.update(self.task, completed=self.done, total=total)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


@contextmanager
def byte_progress(
    console: Console, description: str, *, enabled: bool = True
) -> Iterator[Callable[[int, int], None] | None]:
    """A ``(bytes, total)`` callback drawing a bar on ``console``, or ``None``.

    Args:
        console: where the bar goes (stderr).
        description: the bar's label.
        enabled: False for output meant for programs (``--json``).

    Yields:
        The callback, or ``None`` when ``console`` is not a terminal or not ``enabled``.

    """
    if not enabled or not console.is_terminal:
        yield None
        return
    bar = _Bar(console, description)
    try:
        yield bar
    finally:
        bar.stop()
