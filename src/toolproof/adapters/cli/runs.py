"""``toolproof run|verify|replay|diff|show`` and ``runs list``: runs from the command line.

Exit codes: 0 ok; 1 usage or input error (a bad spec, an unknown run); 2 the run's
report failed, verification failed, replay refused or came out different. ``RUN`` is
a run directory anywhere, or a run id or unique prefix looked up in ``<root>/runs/``
(see :func:`toolproof.adapters.cli.locate.resolve_run`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolproof.adapters.cli.agent_replay import print_fork, replay_agent
from toolproof.adapters.cli.app import (
    ToolproofCommand,
    ToolproofGroup,
    docs_epilog,
    emit_json,
    err_console,
    exit_for,
    out_console,
    run_async,
)
from toolproof.adapters.cli.chain import chain_command, print_link, with_link
from toolproof.adapters.cli.corpus_change import document_changes
from toolproof.adapters.cli.locate import resolve_run
from toolproof.adapters.cli.lock import run_lock
from toolproof.adapters.cli.options import JsonOption, OptionalConfigOption, RootOption
from toolproof.adapters.cli.show import claim_view, print_claims, show_command
from toolproof.adapters.cli.signatures import print_signatures, signature_check
from toolproof.adapters.cli.summary import count, finding_line, print_findings, print_verification
from toolproof.adapters.cli.tools import print_quarantine
from toolproof.contract.runs import Policy  # typer reads --policy's choices from it
from toolproof.errors import InputError, ReplayRefused, VerificationError

if TYPE_CHECKING:
    from toolproof.contract.runs import Plan
    from toolproof.contract.tools import ToolsetDescriptor
    from toolproof.contract.trace import TraceEvent
    from toolproof.runs.replay import ReplayResult
    from toolproof.runs.run import RunOutcome

__all__ = ["register", "runs_app"]

RunArgument = typer.Argument(
    ...,
    help="A run directory (any path), or a run id or unique prefix of one in ROOT/runs.",
)
SHORT_ID_HEX = 12
"""Hex digits of a run id shown by ``runs list`` (any unique prefix names the run)."""

runs_app = typer.Typer(
    cls=ToolproofGroup,
    help="List the runs under an artifact root.",
    epilog=docs_epilog("runs.md"),
    no_args_is_help=True,
)


def _progress_run(spec_path: Path, root: Path, quiet: bool) -> RunOutcome:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from toolproof.runs.spec import load_spec

    loaded = load_spec(spec_path)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet,
    )
    task = progress.add_task("planning", total=None)

    def on_plan(plan: Plan) -> None:
        progress.update(task, total=len(plan.nodes), description="running")

    def on_event(event: TraceEvent) -> None:
        from toolproof.contract.trace import StepFinished, StepStarted

        if isinstance(event, StepStarted):
            progress.update(task, description=f"step {event.step}")
        elif isinstance(event, StepFinished):
            progress.advance(task)

    async def go() -> RunOutcome:
        from toolproof.adapters.telemetry.instrument import instrument_from_config
        from toolproof.config import CONFIG, load_toolset, run_registries
        from toolproof.runs.run import execute_run

        async with load_toolset(loaded.toolset_path) as toolset:
            print_quarantine(toolset)
            stop = instrument_from_config(toolset.resources[CONFIG].telemetry)
            try:
                return await execute_run(
                    loaded.spec,
                    root=root,
                    toolset=toolset,
                    on_event=on_event,
                    on_plan=on_plan,
                    registries=run_registries(),
                )
            finally:
                stop()

    with progress:
        return run_async(go())


def _run(
    spec: Path = typer.Argument(..., help="The run spec (TOML, or JSON if it ends in .json)."),
    root: Path = RootOption,
    as_json: bool = JsonOption,
) -> None:
    """Plan, execute and verify a spec; write the run directory under ROOT/runs/."""
    outcome = _progress_run(spec, root, as_json)
    report = outcome.report
    failures = [f"[{r.check}] {f.file}: {f.message}" for r, f in report.failing()]
    if as_json:
        emit_json(
            {
                "run_id": outcome.run_id,
                "path": f"runs/{outcome.run_id}",
                "reused": outcome.reused,
                "outcome": report.outcome,
                "report_id": report.id,
                "claims": len(outcome.outcome.claims),
                "tool_calls": outcome.live_calls,
                "stopped": outcome.outcome.stopped,
                "failures": failures,
                "findings": [
                    finding_line(result.check, finding)
                    for result in report.results
                    for finding in result.findings
                ],
            }
        )
    else:
        out_console.print(f"[bold]claims[/] ({len(outcome.outcome.claims)})")
        print_claims(claim_view(outcome.path))
        findings = sum(len(result.findings) for result in report.results)
        colour = "green" if report.outcome == "passed" else "red"
        out_console.print(
            f"[bold]verification[/]: [{colour}]{report.outcome}[/] ({report.policy} policy): "
            f"{count(len(report.sequence), 'check')} in order, {count(findings, 'finding')}, "
            f"{count(outcome.live_calls, 'tool call')}"
        )
        print_findings(report)
        note = " (an identical run was already there: reused)" if outcome.reused else ""
        out_console.print(f"[bold]run directory[/]: {outcome.path}{note}")
    if report.outcome != "passed":
        raise exit_for(VerificationError)


def _verify(
    run: str = RunArgument,
    root: Path = RootOption,
    policy: Policy | None = typer.Option(None, "--policy", help="Judge by this policy."),
    as_json: bool = JsonOption,
    recover: bool = typer.Option(
        False, "--recover", help="Finalize a live serve session a killed server left, then verify."
    ),
    signers: list[Path] = typer.Option(
        [], "--signer", help="A public key that must have signed the run (repeatable)."
    ),
    attestations: list[Path] = typer.Option(
        [], "--attestation", help="An envelope to check (default ROOT/attestations/<run>)."
    ),
    require_signature: bool = typer.Option(
        False, "--require-signature", help="Refuse a run without a valid signature."
    ),
    otel_spans: Path | None = typer.Option(
        None,
        "--otel-spans",
        help="Also check an OTLP JSON span export: its spans must match the recorded calls.",
    ),
    chain: bool = typer.Option(
        False, "--chain", help="A session's segment: verify it and every segment before it."
    ),
) -> None:
    """Check a run directory: manifest first, then the ordered checks, then its report."""
    from toolproof.adapters.cli.progress import byte_progress
    from toolproof.config import run_registries
    from toolproof.runs.chain import check_link
    from toolproof.verify.verifier import verify_run

    directory = resolve_run(root, run)
    if recover or chain:
        from toolproof.adapters.cli.serve import recover_command

        (recover_command if recover else chain_command)(directory, as_json)
        return
    with byte_progress(err_console, "verify", enabled=not as_json) as progress:
        verification = verify_run(
            directory, policy=policy, checks=run_registries().checks, progress=progress
        )
    link = check_link(directory)
    signatures = signature_check(directory, signers, attestations, require_signature)
    signed_ok = signatures is None or signatures.ok
    # a span that disagrees with the run: VerificationError, exit 2
    spans = None
    if otel_spans and verification.ok:
        from toolproof.adapters.telemetry.check import check_spans

        spans = check_spans(directory, otel_spans)
    if as_json:
        document = verification.to_json()
        document.update({"otel_spans": spans.to_json()} if spans else {})
        document["lock"] = run_lock(directory)
        if signatures is not None:
            document["attestations"] = signatures.to_json()
            document["ok"] = verification.ok and signed_ok
        emit_json(with_link(document, link))
    else:
        print_verification(verification, directory)
        lock = run_lock(directory)
        out_console.print(f"tool lock: {lock}" if lock else "tool lock: none (no toolproof.lock)")
        if signatures is not None:
            print_signatures(signatures)
        if spans is not None:
            out_console.print(f"otel spans: {spans.describe()}")
        print_link(link)
        ok = verification.ok and signed_ok and link.ok
        out_console.print("verified" if ok else "verification FAILED")
    if not verification.ok or not signed_ok or not link.ok:
        raise exit_for(VerificationError)


async def _current_descriptor(
    config: Path | None,
) -> tuple[ToolsetDescriptor | None, str]:
    """The Toolset descriptor of ``--config`` to compare a replay against, or why none.

    Frozen replay needs no live tool, so without ``--config`` it re-plans against the
    recorded runtime descriptor (and says so); with it, the file is loaded and any
    change of any tool refuses the replay.
    """
    from toolproof.config import load_toolset

    if config is None:
        return None, (
            "replayed against the recorded tool descriptors; pass --config "
            "toolproof.toml to also check them against the current tools"
        )
    async with load_toolset(config) as toolset:
        return toolset.descriptor(), ""


def _replay(
    run: str = RunArgument,
    root: Path = RootOption,
    config: Path | None = OptionalConfigOption,
    lenient: bool = typer.Option(False, "--lenient", help="Report differences, don't refuse."),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="Replay a recorded agent session by running MODULE:FUNCTION, an async "
        "(Session) -> None, against it (docs/agents.md).",
        metavar="MODULE:FUNCTION",
    ),
    chain: bool = typer.Option(
        False,
        "--chain",
        help="With --agent: RUN is a sealed session's head; replay every segment, 1 to RUN.",
    ),
    then_live: bool = typer.Option(
        False,
        "--then-live",
        help="With --agent and --config: serve RUN until the first divergent request, then "
        "go on live, recorded as a new run that names RUN as its parent (a fork).",
    ),
    as_json: bool = JsonOption,
) -> None:
    """Replay a run frozen (recorded results, no live call) and compare the traces."""
    directory = resolve_run(root, run)
    if agent is not None:
        replay_agent(directory, agent, config, as_json, chain=chain, then_live=then_live)
        return
    if chain or then_live:
        flag = "--chain" if chain else "--then-live"
        raise InputError(f"{flag} replays an agent's session: give --agent", rule="agent")

    async def go() -> tuple[ReplayResult, bool, str]:
        from toolproof.config import run_registries
        from toolproof.runs.replay import replay_run

        descriptor, note = await _current_descriptor(config)
        registries = run_registries()
        if descriptor is None:
            return await replay_run(directory, lenient=lenient, registries=registries), False, note
        replayed = await replay_run(
            directory, toolset=descriptor, lenient=lenient, registries=registries
        )
        return replayed, True, ""

    try:
        result, compared, note = asyncio.run(go())
    except ReplayRefused as exc:
        changed = exc.fields.get("changed") or []
        documents = document_changes(config, directory, changed) if config and changed else []
        if documents:
            exc = ReplayRefused(f"{exc.message}; {'; '.join(documents)}", **exc.fields)
        if as_json:
            emit_json({"refused": True, "message": exc.message, "live_calls": 0})
        raise exc from None
    document: dict[str, Any] = {"refused": False, "descriptor_compared": compared}
    if note:
        document["note"] = note
    document.update(result.to_json())
    if as_json:
        emit_json(document)
    else:
        if not compared:
            err_console.print(f"note: {escape(note)}")
        for difference in result.differences:
            out_console.print(f"[yellow]difference:[/] {escape(difference)}")
        if result.identical:
            out_console.print(f"replay identical: {result.events} events, 0 live calls")
        else:
            why = result.first_difference["why"] if result.first_difference else "report differs"
            out_console.print(f"replay DIFFERS: {escape(why)}")
    if not result.identical:
        raise exit_for(ReplayRefused)


def _diff(
    run_a: str = typer.Argument(..., help="The first run (a directory, or a run id or prefix)."),
    run_b: str = typer.Argument(..., help="The second run (a directory, or a run id or prefix)."),
    root: Path = RootOption,
    as_json: bool = JsonOption,
) -> None:
    """Show which files of two runs differ, and the first differing trace event.

    Exit 0 when the runs are identical, 2 when they differ or a run's files do not
    match its manifest (refused, named), 1 on an input error (no such run).
    """
    from toolproof.runs.diff import diff_runs

    result = diff_runs(resolve_run(root, run_a), resolve_run(root, run_b))
    if as_json:
        emit_json(result.to_json())
        if not result.identical:
            raise exit_for(ReplayRefused)  # as a replay that came out different
        return
    table = Table(title=f"{result.a} vs {result.b}")
    table.add_column("file", overflow="fold")
    table.add_column("status")
    for path, status in result.files.items():
        if status != "same":
            table.add_row(path, status)
    out_console.print(table if table.row_count else "the runs are identical")
    if result.fork is not None:
        print_fork(result.fork)
    if result.first_event is not None:
        out_console.print(f"first trace difference: {escape(result.first_event['why'])}")
    if result.varying:
        sources = "; ".join(
            f"{name} (varies: {', '.join(what) or 'unspecified'})"
            for name, what in sorted(result.varying.items())
        )
        out_console.print(f"declared non-deterministic sources: {escape(sources)}")
    if result.explained:
        out_console.print(
            "the difference comes from a declared non-deterministic source: variation between "
            "two live runs, not corruption (each run still replays frozen on its own)"
        )
    if not result.identical:
        raise exit_for(ReplayRefused)  # as a replay that came out different


@runs_app.command("list", cls=ToolproofCommand, epilog=docs_epilog("runs.md"))
def list_command(
    root: Path = RootOption,
    as_json: bool = JsonOption,
    verify: bool = typer.Option(False, "--verify", help="Also verify each run (slower)."),
) -> None:
    """List the runs under ROOT/runs, newest first: id, task, outcome, claims, calls."""
    from toolproof.runs.listing import list_runs
    from toolproof.verify.verifier import verify_run

    rows = []
    for entry in list_runs(root):
        row = entry.to_json()
        if verify:
            row["verified"] = verify_run(entry.path).ok
        rows.append(row)
    if as_json:
        emit_json({"root": str(root), "runs": rows})
        return
    if not rows:
        out_console.print(f"no runs under {escape(str(root / 'runs'))}")
        return
    out_console.print(
        f"[bold]{count(len(rows), 'run')}[/] in {escape(str(root / 'runs'))}, newest first"
    )
    for row in rows:
        name = str(row["run_id"] or Path(row["path"]).name)
        claims = "? claims" if row["claims"] is None else count(row["claims"], "claim")
        parts = [
            name[: len("run_") + SHORT_ID_HEX] + "…",
            row["started_at"][:19].replace("T", " ") or "(no timings)",
            row["outcome"] or "(no report)",
            claims,
            count(row["tool_calls"], "call"),
        ]
        if verify:
            parts.append("verifies" if row["verified"] else "DOES NOT VERIFY")
        out_console.print(escape("  ".join(parts)))
        out_console.print(f"  {escape(row['task'] or '(no readable spec)')}", style="dim")


_SHOW_HELP = (
    "Show a run's claims with their cited snippets (or, without claims, its tool calls).\n\n"
    "An agent run with model turns is a timeline: each model turn, the tool calls after it, "
    "then the answer with each citation and its bytes. The run is verified first and the "
    "verdict printed first (in --json: verification); exit 2 when it fails. The trace is "
    "read as it comes, in memory bounded by --limit: past it, calls are counted "
    "(calls_total and timeline_total in --json), not shown."
)
"""``toolproof show --help``: plain text, a paragraph a line (Typer keeps a docstring's breaks)."""


def register(app: typer.Typer) -> None:
    """Add ``run``, ``verify``, ``replay``, ``diff``, ``show`` and ``runs list`` to ``app``."""
    for name, command in (
        ("run", _run),
        ("verify", _verify),
        ("replay", _replay),
        ("diff", _diff),
        ("show", show_command),
    ):
        plain = _SHOW_HELP if name == "show" else None  # None: the docstring
        app.command(name, cls=ToolproofCommand, epilog=docs_epilog("runs.md"), help=plain)(command)
    app.add_typer(runs_app, name="runs")
