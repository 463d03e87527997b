"""``toolproof replay RUN --agent MODULE:FUNCTION``: an agent's session replayed, or forked.

``--then-live`` forks it (:func:`~toolproof.adapters.session_runs.replay_session`
``then="live"``); :func:`print_fork` is what ``toolproof diff`` says of a fork.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal

from rich.markup import escape

from toolproof.adapters.cli.app import emit_json, err_console, out_console
from toolproof.adapters.cli.summary import count
from toolproof.errors import InputError, ReplayRefused

__all__ = ["load_agent", "print_fork", "replay_agent"]


def print_fork(fork: dict[str, Any]) -> None:
    """Print the fork ``diff_runs`` found: who forked from whom, the shared prefix, the fork."""
    shared = fork["shared"]
    out_console.print(f"fork: {fork['child']} forked from {fork['parent']}")
    out_console.print(
        f"shared prefix: events 0-{shared - 1} ({shared} events) are the parent's"
        if shared
        else "shared prefix: none (the first events differ)"
    )
    where = "no divergence" if fork["event"] is None else f"fork at event {fork['event']}"
    out_console.print(f"{where}: {escape(fork['reason'])}")


_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
"""What ``MODULE`` of ``--agent MODULE:FUNCTION`` may be: a dotted module name."""


def load_agent(reference: str) -> Any:
    """The function ``MODULE:FUNCTION`` names (the working directory is importable).

    Raises:
        InputError: not ``MODULE:FUNCTION``, ``MODULE`` is not a dotted module name (a
            file path, a relative import), the module cannot be imported, or it has no
            such callable.

    """
    module_name, sep, name = reference.partition(":")
    if not sep or not module_name or not name:
        raise InputError(f"--agent {reference!r}: expected MODULE:FUNCTION", rule="agent")
    if not _MODULE.fullmatch(module_name):
        raise InputError(
            f"--agent {reference!r}: {module_name!r} is not a module name (rule: dotted "
            "Python names importable from the working directory, e.g. agents.triage, not "
            "a file path)",
            rule="agent",
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: report it, naming it
        raise InputError(
            f"--agent {reference!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}",
            rule="agent",
        ) from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise InputError(
            f"--agent {reference!r}: {module_name!r} has no callable {name!r}", rule="agent"
        )
    return function


def replay_agent(
    directory: Path,
    reference: str,
    config: Path | None,
    as_json: bool,
    *,
    chain: bool = False,
    then_live: bool = False,
) -> None:
    """``toolproof replay RUN --agent MODULE:FUNCTION [--chain | --then-live]``.

    Exit 0: identical (or, ``--then-live``, the fork was recorded); 2: refused.

    Raises:
        InputError: a bad ``--agent``; ``--then-live`` without ``--config``.
        ReplayRefused: the replay refused (its first line; the diff went to stderr).

    """
    from toolproof.adapters.session_runs import replay_session

    function = load_agent(reference)
    then: Literal["frozen", "live"] = "live" if then_live else "frozen"
    try:
        result = asyncio.run(
            replay_session(directory, function, toolset=config, chain=chain, then=then)
        )
    except ReplayRefused as exc:
        first, *diff = exc.message.splitlines()
        if as_json:
            emit_json({"refused": True, "message": exc.message, "live_calls": 0})
        else:
            for line in diff:
                err_console.print(escape(line), highlight=False)
        raise ReplayRefused(first, **exc.fields) from None
    document = {
        "refused": False,
        "agent": reference,
        "run_id": result.run_id,
        "identical": result.identical,
        "calls": result.calls,
        "turns": result.turns,
        "live_calls": result.live_calls,
        "verified": result.verified,
        "segments": result.segments,
    }
    if result.forked is not None:
        document["forked"] = {
            "run_id": result.forked.run_id,
            "forked_from": result.forked.forked_from.to_json(),
            "live_calls": result.forked.live_calls,
            "live_turns": result.forked.live_turns,
        }
    if as_json:
        emit_json(document)
    elif result.forked is not None:
        fork = result.forked
        served = f"{count(result.calls, 'tool call')} and {count(result.turns, 'model turn')}"
        where = fork.forked_from.event
        out_console.print(
            f"agent replay forked: {served} served from the recording, then "
            f"{count(fork.live_calls, 'live call')} and {count(fork.live_turns, 'live model turn')}"
        )
        at = "never diverged" if where is None else f"diverged at event {where}"
        out_console.print(f"the agent {at}: {escape(fork.forked_from.reason)}")
        # of a chain (--chain): the segment the agent diverged in, or the head
        out_console.print(f"new run: {fork.run_id} (forked from {fork.forked_from.run})")
    else:
        turns = f" and {count(result.turns, 'model turn')}" if result.turns else ""
        verifies = f"the chain of {result.segments} segments" if chain else "the run"
        out_console.print(
            f"agent replay identical: {count(result.calls, 'tool call')}{turns} served from the "
            f"recording, {result.live_calls} live calls; {verifies} verifies"
        )
