"""The ``toolproof`` command line, run in this process (Typer's ``CliRunner``).

A CLI contract test checks what a command prints and its exit code; starting a Python
process for it costs about a second of imports and tells nothing more. Tests where the
process is the point (signals, a killed worker, the MCP stdio protocol, ``serve``, the
console-script entry point) keep ``subprocess``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from toolproof.adapters.cli import app

ROOT = Path(__file__).resolve().parents[2]
"""The repository (its own modules are never forgotten)."""


@dataclass(frozen=True)
class Ran:
    """What one command did: the fields of ``subprocess.CompletedProcess`` tests read.

    Attributes:
        returncode: the exit code (``SystemExit`` of the command, 0 when it returned).
        stdout: what it printed on standard output.
        stderr: what it printed on standard error (Click >= 8.2 keeps it apart).

    """

    returncode: int
    stdout: str
    stderr: str


def toolproof(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
) -> Ran:
    """Run ``toolproof ARGS`` in process, in ``cwd``, with ``env`` set on top of the environment.

    A ``None`` in ``env`` unsets that variable for the command.

    An exception the command line does not map to an exit code propagates (a crash is a
    test failure with its traceback, not an exit code to compare). As a fresh process
    would, the next command imports a config's ``[[python]]`` modules anew: the folders
    a command put on ``sys.path`` are taken off it again, with the modules loaded from them.
    """
    _forget_user_modules()
    previous = Path.cwd()
    path = list(sys.path)
    modules = set(sys.modules)
    if cwd is not None:
        os.chdir(cwd)

    def invoke() -> Result:
        return CliRunner().invoke(
            app,
            list(args),
            input=input,
            env=dict(env or {}),
            catch_exceptions=False,
            prog_name="toolproof",
        )

    try:
        if _loop_running():  # a command runs its own loop: not inside a caller's (Playwright)
            with ThreadPoolExecutor(1) as pool:
                result = pool.submit(invoke).result()
        else:
            result = invoke()
    finally:
        os.chdir(previous)
        added = [Path(entry) for entry in sys.path if entry and entry not in path]
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None)
            if file and any(Path(file).is_relative_to(folder) for folder in added):
                del sys.modules[name]
    return Ran(result.exit_code, result.stdout, result.stderr)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _forget_user_modules() -> None:
    """Drop the top-level tool modules anything before imported (a config's ``[[python]]``).

    A fresh process imports a config's ``[[python]]`` modules anew; a module of the same
    name left by an earlier test (``evidence_tools`` from ``examples/`` or another test's
    folder) would be used instead of the file this command's config names, or of its
    edited text. Installed packages, the stdlib and the repository's ``src`` and ``tests``
    stay.
    """
    keep = [
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        ROOT / "src",
        ROOT / "tests",
    ]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or "." in name or hasattr(module, "__path__"):
            continue  # built in, a submodule, or a package (plugins are packages)
        where = Path(file).resolve()
        if not any(where.is_relative_to(k) for k in keep):
            del sys.modules[name]
