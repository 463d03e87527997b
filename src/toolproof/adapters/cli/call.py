"""``toolproof call NAME --args JSON``: call one tool of a toolproof.toml from the shell.

Standard output carries exactly one canonical JSON document (RFC 8785): the result's
value (exit 0), or the :class:`~toolproof.ToolFailure` (exit 1, its kind and message
also as one ``error:`` line on stderr). Whatever the tools write to stdout while they
load and run (``print``, fd 1, child processes) goes to stderr, so stdout stays one
document; what did not bind is shown on stderr first (the quarantine table).
``--record ROOT`` records the call as a session run under ``ROOT/runs/`` (the
recorder of ``record_session`` and ``serve --record``) and prints its path on stderr.
With a ``[policy]``, the call is decided first, recorded or not, for ``--principal``
(default ``Agent::default``; docs/policy.md).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from toolproof.adapters.cli.app import (
    ToolproofCommand,
    docs_epilog,
    emit_json,
    err_console,
    exit_for,
    report_error,
    run_async,
)
from toolproof.adapters.cli.options import ConfigOption
from toolproof.adapters.cli.tools import print_quarantine
from toolproof.errors import InputError, ToolCallError

if TYPE_CHECKING:
    from toolproof.contract.tools import ToolResult
    from toolproof.tools.toolset import Toolset

__all__ = [
    "CLOSE_MATCHES",
    "KNOWN_SHOWN",
    "call_task",
    "parse_arguments",
    "register",
    "stdout_to_stderr",
]

CLOSE_MATCHES = 3
"""How many similar tool names an unknown name's error suggests (``difflib``, cutoff 0.6)."""
KNOWN_SHOWN = 12
"""How many tool names an unknown name's error lists when none is similar (then ``...``)."""


def call_task(name: str) -> str:
    """The task of the run ``call --record`` writes: ``toolproof call NAME``."""
    return f"toolproof call {name}"


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse the ``--args`` option: a JSON object (RFC 8259), the tool's arguments.

    Args:
        text: the option's value as given on the command line.

    Returns:
        The object, as a dict (duplicate keys: the last one wins, as in ``json.loads``).

    Raises:
        InputError: ``text`` is not JSON, or is JSON but not an object; the one-line
            message names ``--args`` and the rule (``field="--args"``).

    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"--args: not JSON ({exc}); pass one JSON object, e.g. --args '{{\"a\": 2}}'",
            field="--args",
            rule="JSON object",
        ) from exc
    if not isinstance(value, dict):
        raise InputError(
            f"--args: expected a JSON object of arguments, got {_a_kind(value)}"
            f"{'' if value is None else ' ' + repr(text.strip()[:40])}; "
            f"pass e.g. --args '{{\"a\": 2}}'",
            field="--args",
            rule="JSON object",
        )
    return value


def _a_kind(value: object) -> str:
    """The JSON kind of ``value`` (:func:`json_kind`) with its article: ``an array``, ``null``."""
    from toolproof.extensions.wrappers.audit import json_kind

    kind = json_kind(value)
    if kind == "null":
        return kind
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _unknown(name: str, toolset: Toolset, config: Path) -> InputError:
    """The error of a name no exposed tool has: its quarantine rule, or the closest names.

    A quarantined name, or a variant of a quarantined combo (``t_retry`` of
    ``t_retry_timeout`` when ``retry`` was refused), says so with the rule.
    """
    quarantined = [item for item in toolset.quarantined if item.name == name]
    if quarantined:
        return InputError(
            f"tool {name!r} in {config} is quarantined, not bound: {quarantined[0].rule}",
            tool=name,
            rule="quarantined",
        )
    # a variant a combo did not mint because a layer at or below it was refused: the
    # quarantine entry names the whole combo (t_retry_timeout), not t_retry
    refused = [
        item
        for item in toolset.quarantined
        if item.field.startswith("tools.") and item.name.startswith(f"{name}_")
    ]
    if refused:
        return InputError(
            f"tool {name!r} in {config} is not bound: it is a variant of the quarantined "
            f"combo {refused[0].name!r}: {refused[0].rule}",
            tool=name,
            rule="quarantined",
        )
    names = [tool.name for tool in toolset.exposed()]
    close = difflib.get_close_matches(name, names, n=CLOSE_MATCHES)
    if close:
        hint = f"; did you mean {', '.join(close)}?"
    else:
        hint = f" (known: {', '.join(names[:KNOWN_SHOWN])}{', ...' * (len(names) > KNOWN_SHOWN)})"
    return InputError(
        f"no tool named {name!r} in {config}{hint}",
        tool=name,
        rule="not found",
    )


async def _call(
    name: str,
    arguments: dict[str, Any],
    config: Path,
    record: Path | None,
    principal: str | None = None,
) -> tuple[ToolResult, Path | None]:
    """Load ``config``, call ``name`` once (recorded under ``record`` when given).

    A ``[policy]`` decides the call first for ``principal`` (``Type::id``, default
    ``Agent::default``), recorded or not.

    Returns:
        The result, and the run directory when recorded.

    Raises:
        InputError: a bad config, no exposed tool named ``name``, or a ``principal``
            that is not ``Type::id``.
        RecordingError: the run cannot be written.

    """
    from toolproof.adapters.session_runs import record_session
    from toolproof.config import load_toolset
    from toolproof.tools.policy import DEFAULT_PRINCIPAL, PolicyGate, gated_call, principal_entity

    if principal is not None:
        principal_entity(principal)  # refused before anything loads
    async with load_toolset(config) as toolset:
        print_quarantine(toolset)
        tool = toolset.exposed_tool(name)  # a hidden tool reads as an unknown one, as served
        if tool is None:
            raise _unknown(name, toolset, config)
        if record is None:
            policy = toolset.policy
            who = principal or DEFAULT_PRINCIPAL
            gate = None if policy is None else PolicyGate(policy, who)
            return await gated_call(gate, tool, arguments), None
        async with record_session(
            toolset, root=record, task=call_task(name), principal=principal
        ) as session:
            result = await session.call(name, arguments)
        assert session.run_id is not None  # set when the block ends
        return result, record / "runs" / session.run_id


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout inside the block to stderr.

    ``print`` (``sys.stdout``) and file descriptor 1 both: ``os.write(1, ...)``, a C
    extension, a child process (a ``process`` backend worker) started inside the block.
    Both are put back when the block ends. Without a usable fd 1 (closed), only
    ``sys.stdout`` is redirected.
    """
    sys.stdout.flush()
    try:
        saved: int | None = os.dup(1)  # not inheritable (PEP 446)
        os.dup2(2, 1)
    except OSError:
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def register(app: typer.Typer) -> None:
    """Add ``call`` to ``app``."""

    @app.command("call", cls=ToolproofCommand, epilog=docs_epilog("tools.md"))
    def call(
        name: str = typer.Argument(..., help="The tool or variant to call."),
        args: str = typer.Option(
            "{}", "--args", help="The arguments: one JSON object (default {})."
        ),
        config: Path = ConfigOption,
        record: Path | None = typer.Option(
            None,
            "--record",
            help="Record the call as a run under the artifact root ROOT (ROOT/runs/<run_id>); "
            "its path is printed on stderr.",
            metavar="ROOT",
        ),
        principal: str | None = typer.Option(
            None,
            "--principal",
            help="Who the call acts for, Type::id (\\[policy]'s Cedar principal; default "
            "Agent::default).",
            metavar="TYPE::ID",
        ),
    ) -> None:
        """Call one tool and print its result as JSON (exit 0), or its failure (exit 1)."""
        arguments = parse_arguments(args)
        with stdout_to_stderr():  # stdout carries one JSON document
            result, run = run_async(_call(name, arguments, config, record, principal))
        if run is not None:
            err_console.print(f"toolproof: recorded 1 call in {run}", markup=False)
        if result.ok:
            emit_json(result.value)
            return
        assert result.failure is not None
        emit_json(result.failure.to_json())
        report_error(ToolCallError(result.failure))
        raise exit_for(ToolCallError)
