"""The verify progress bar: on a terminal only, after a second, never for --json."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from toolproof.adapters.cli import progress as progress_module
from toolproof.adapters.cli.progress import SHOW_AFTER_SECONDS, byte_progress


def _console(terminal: bool) -> Console:
    return Console(file=io.StringIO(), force_terminal=terminal, width=100)


def test_no_bar_off_a_terminal_or_for_json() -> None:
    with byte_progress(_console(False), "verify run_x") as callback:
        assert callback is None
    with byte_progress(_console(True), "verify run_x", enabled=False) as callback:
        assert callback is None


def test_a_bar_counts_the_bytes_once_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SHOW_AFTER_SECONDS == 1.0
    monkeypatch.setattr(progress_module, "SHOW_AFTER_SECONDS", 0.0)
    console = _console(True)
    with byte_progress(console, "verify run_x") as callback:
        assert callback is not None
        callback(300, 1000)
        callback(700, 1000)
        bar = callback.progress  # type: ignore[attr-defined]
        (task,) = bar.tasks
        assert (task.description, task.completed, task.total) == ("verify run_x", 1000, 1000)
    assert "verify run_x" in console.file.getvalue()  # type: ignore[attr-defined]


def test_a_read_shorter_than_the_delay_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "SHOW_AFTER_SECONDS", 1e9)
    console = _console(True)
    with byte_progress(console, "verify run_x") as callback:
        assert callback is not None
        callback(10, 10)
        assert callback.progress is None  # type: ignore[attr-defined]
    assert console.file.getvalue() == ""  # type: ignore[attr-defined]
