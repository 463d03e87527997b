"""The options several commands share, declared once so they read the same everywhere.

Every long option has at most one short form, and the same one on every command:
``--config``/``-c``, ``--root``/``-r``; ``--json`` has none.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["SHORT_OPTIONS", "ConfigOption", "JsonOption", "OptionalConfigOption", "RootOption"]

SHORT_OPTIONS = {"--config": "-c", "--root": "-r", "--queue": "-Q"}
"""The short form of each long option that has one (the same on every command)."""

ConfigOption = typer.Option(
    Path("toolproof.toml"), "--config", "-c", help="The composition root (toolproof.toml)."
)
OptionalConfigOption = typer.Option(
    None,
    "--config",
    "-c",
    help="The composition root (toolproof.toml) to compare the run's tools against.",
)
RootOption = typer.Option(
    Path("."), "--root", "-r", help="The artifact root (runs live in ROOT/runs)."
)
JsonOption = typer.Option(False, "--json", help="Print one canonical JSON document.")
