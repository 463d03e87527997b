"""What ``toolproof serve --record`` does before and after serving, and ``verify --recover``.

:func:`check_session` refuses a ``--session-id`` / ``--resume`` that cannot hold before
anything loads; :func:`end_recording` seals the recording when the server stops and
says where its runs are; :func:`recover_command` finalizes a killed server's live
session (docs/serve.md, docs/durability.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from toolproof.adapters.cli.app import emit_json, err_console, exit_for, out_console
from toolproof.adapters.cli.summary import count
from toolproof.errors import InputError, VerificationError

if TYPE_CHECKING:
    from toolproof.runs.finalize import SessionOutcome
    from toolproof.runs.segments import SegmentedRecording

__all__ = ["check_session", "end_recording", "kept", "recover_command"]


def check_session(record: Path | None, name: str, resume: bool) -> None:
    """Refuse a ``--session-id`` / ``--resume`` that cannot hold, before anything loads.

    Raises:
        InputError: ``--session-id`` without ``--record``, ``--resume`` without
            ``--session-id``, a bad name, an unfinished session without ``--resume``, or
            the id of a finished session (:func:`~toolproof.runs.resume.check_session_start`).

    """
    from toolproof.runs.resume import check_session_id, check_session_start

    if name and record is None:
        raise InputError("--session-id needs --record DIR (a named session is recorded)")
    if resume and not name:
        raise InputError("--resume needs --session-id NAME (the session to resume)")
    if name:
        check_session_id(name)
    if name and record is not None:  # unfinished: resume it; finished: its id is spent
        check_session_start(record, name, resume, "--resume")


async def end_recording(
    recording: SegmentedRecording, discard: bool, earlier: list[str] | None = None
) -> None:
    """Seal a live recording's last segment; a server that failed before any call leaves none.

    ``earlier``: a resumed session's recorded runs, segment 1 first.

    Raises:
        RecordingError: the recording or one of its runs cannot be written (that segment
            and every later one are kept live for ``toolproof verify --recover``).

    """
    if discard:
        await recording.abort()
        return
    outcomes = await recording.finish()
    if earlier:  # a resumed session: the recorded chain, then what was recorded live
        head = outcomes[-1].path.name if outcomes else earlier[-1]
        err_console.print(
            f"toolproof: resumed session {recording.session}: recorded "
            f"{count(sum(outcome.calls for outcome in outcomes), 'live call')} in "
            f"{count(len(outcomes), 'new segment')} after {count(len(earlier), 'segment')}; "
            f"the last is {recording.root / 'runs' / head} (verify all: toolproof verify "
            f"{head} --chain --root {recording.root})"
        )
        return
    done = outcomes[-1]
    if len(outcomes) == 1:
        err_console.print(
            f"toolproof: recorded {kept(done)} in {done.path} "
            f"(verify: toolproof verify {done.path.name} --root {recording.root})"
        )
        return
    calls = sum(outcome.calls for outcome in outcomes)
    reads = sum(outcome.reads for outcome in outcomes)
    held = count(calls, "call") + (f" and {count(reads, 'read')}" if reads else "")
    err_console.print(
        f"toolproof: recorded {held} in {len(outcomes)} segments; the last is {done.path} "
        f"(verify all: toolproof verify {done.path.name} --chain --root {recording.root})"
    )


def kept(outcome: SessionOutcome) -> str:
    """``1 call``, ``2 calls`` or ``2 calls and 1 read``: what a session's run holds."""
    calls = count(outcome.calls, "call")
    return f"{calls} and {count(outcome.reads, 'read')}" if outcome.reads else calls


def recover_command(directory: Path, as_json: bool) -> None:
    """``toolproof verify --recover``: finalize the live session a killed server left.

    Prints what was kept and dropped, then verifies the recovered run. Exit code 0 when
    it verifies, 2 when it does not, 1 when ``directory`` is not a live session.
    """
    from toolproof.runs.finalize import recover_session
    from toolproof.verify.verifier import verify_run

    outcome = asyncio.run(recover_session(directory))
    verification = verify_run(outcome.path)
    if as_json:
        emit_json(
            {
                "recovered": True,
                "run_id": outcome.run_id,
                "path": str(outcome.path),
                "kept_calls": outcome.calls,
                "dropped": outcome.dropped,
                "verification": verification.to_json(),
            }
        )
    else:
        out_console.print(f"recovered {kept(outcome)} into {outcome.path}")
        for item in outcome.dropped:
            err_console.print(f"[yellow]dropped:[/] {escape(item)}")
        for failure in verification.failures:
            err_console.print(f"[bold red]FAIL[/] {escape(str(failure))}")
        out_console.print("verified" if verification.ok else "verification FAILED")
    if not verification.ok:
        raise exit_for(VerificationError)
