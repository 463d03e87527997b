"""An agent's session recorded as a run (:func:`record_session`) and replayed frozen.

:func:`record_session` opens a live session (:mod:`toolproof.runs.live`, the
recorder ``serve --record`` uses) over a Toolset and yields a
:class:`~toolproof.adapters.session.Session`; when the ``async with`` block ends,
the session is finalized into ``ROOT/runs/<run_id>`` (:attr:`Session.run_id`),
verifiable with ``toolproof verify``.

:func:`replay_session` verifies the run, then serves the agent's tool calls by tool,
canonical arguments and occurrence (so concurrent and repeated identical calls replay),
its model turns by match key and occurrence, and its reads, from the recording
(:class:`~toolproof.sessions.frozen.FrozenSession`, through the one replay matcher); the
first divergence refuses with :class:`~toolproof.errors.ReplayRefused` naming the
recorded event index and a unified diff of recorded vs asked. With ``chain=True`` it
replays a session sealed into segments as one agent run, from segment 1 to the head,
one segment in memory at a time (:meth:`FrozenSession.load_chain`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from toolproof.adapters.forked import ForkedSession, changed_tools
from toolproof.adapters.resumed import ResumedSession
from toolproof.adapters.session import Session
from toolproof.config import load_toolset
from toolproof.contract.forks import ForkedFrom
from toolproof.errors import InputError, ReplayRefused
from toolproof.evidence.grounding import DEFAULT_MIN_QUOTE_WORDS, Grounding
from toolproof.extensions.approvals.request import Approver
from toolproof.runs.live import SESSION_TASK
from toolproof.runs.replay import describe_descriptor_change
from toolproof.runs.resume import check_session_id, check_session_start
from toolproof.runs.segments import DEFAULT_SEGMENT_CALLS, SegmentedRecording
from toolproof.sessions.frozen import FrozenSession
from toolproof.sessions.presented import present, presented_changes
from toolproof.sessions.resuming import resume_recording
from toolproof.tools.asking import ASKERS, Ask, Askers
from toolproof.tools.policy import principal_entity
from toolproof.tools.resources import RAW_CONFIG
from toolproof.tools.toolset import Toolset
from toolproof.verify.view import RunView

__all__ = ["AgentReplay", "ForkedRun", "record_session", "replay_session", "toolset_of"]

logger = logging.getLogger("toolproof.runs")


@asynccontextmanager
async def toolset_of(
    source: Toolset | str | Path, askers: Askers | None = None
) -> AsyncIterator[Toolset]:
    """``source`` itself when a Toolset, else the Toolset loaded from the ``toolproof.toml``.

    ``askers``: the sampling and elicitation callbacks a loaded Toolset gets.
    """
    if isinstance(source, Toolset):
        yield source
        return
    asks = askers or Askers()
    async with load_toolset(Path(source), sample=asks.sample, elicit=asks.elicit) as toolset:
        yield toolset


def _grounding(toolset: Toolset, level: str | None, words: int | None) -> Grounding:
    """The grounding of a session: the arguments, else the toml's ``[grounding]``."""
    table = (toolset.resources.get(RAW_CONFIG) or {}).get("grounding") or {}
    return Grounding(
        level=cast(Any, table.get("level", "details") if level is None else level),
        min_quote_words=(
            table.get("min_quote_words", DEFAULT_MIN_QUOTE_WORDS) if words is None else words
        ),
    )


@asynccontextmanager
async def record_session(
    source: Toolset | str | Path,
    *,
    root: str | Path,
    task: str,
    approver: Approver | None = None,
    segment_calls: int = DEFAULT_SEGMENT_CALLS,
    grounding: Literal["quote", "details"] | None = None,
    min_quote_words: int | None = None,
    principal: str | None = None,
    session_id: str | None = None,
    resume: bool = False,
    sample: Ask | None = None,
    elicit: Ask | None = None,
) -> AsyncIterator[Session]:
    """Record an agent's session over a Toolset (or a ``toolproof.toml``) as a run.

    A session longer than ``segment_calls`` steps (tool calls, model turns, reads and
    prompt gets) is sealed into consecutive runs, each linked to its predecessor by
    digest, while it records (:mod:`toolproof.runs.segments`, docs/runs.md "Segments"),
    so memory stays bounded however long it runs.

    Args:
        source: a sealed Toolset, or the path of a ``toolproof.toml``.
        root: the artifact root (the run lands in ``root/runs/<run_id>``).
        task: what the agent was asked (the run spec's task).
        approver: the Python approval channel for the ``approve`` layers of this
            session's calls (``async approver(request) -> bool | Decision``, see
            docs/approvals.md); it takes precedence over ``load_toolset(approver=)``.
            ``None``: the Toolset's callback, or decisions from the store.
        segment_calls: steps per segment (default
            :data:`~toolproof.runs.segments.DEFAULT_SEGMENT_CALLS`); ``0``: one run,
            however long.
        grounding: how far the answer's claim is checked (docs/grounding.md):
            ``"details"`` or ``"quote"``; ``None``: the ``toolproof.toml``'s
            ``[grounding] level``, else ``"details"``.
        min_quote_words: at level ``details``, the fewest words a quote that validates
            on its own has (1 to 100); ``None``: ``[grounding] min_quote_words``, else 3.
        principal: who the session acts for, ``Type::id`` (``"Agent::triage"``): the
            Cedar principal of every call when the Toolset has a ``[policy]``
            (docs/policy.md); ``None``: ``Agent::default``.
        session_id: the session's name (its idempotency keys name it; its live
            directory is ``root/sessions/<session_id>``): a named session logs the
            intent of each call of a tool that must act once, so it can resume
            (docs/durability.md). ``None``: ``<stamp>-<pid>``, not resumable.
        resume: continue the session ``session_id`` a crash left: the agent is served
            every recorded call and model turn (no body run, no model asked), then
            records live in a new segment linked to the recovered one; a cut call of a
            tool neither read-only, idempotent nor keyed fails ``outcome_unknown``
            (:class:`~toolproof.adapters.resumed.ResumedSession`).
        sample: ``async sample(params) -> result``, answering the
            ``sampling/createMessage`` requests an imported MCP server sends during
            this session's calls (and a Python tool's ``Context.sample``), MCP wire
            form; it takes precedence over ``load_toolset(sample=)``. Each request and
            answer is a ``request_relayed`` event of the call's block, with both as
            evidence. A ``source`` path is loaded with it, so ``sampling`` is announced
            to the servers; a Toolset announces only what it was loaded with.
        elicit: the same for ``elicitation/create`` (``ElicitRequestParams`` in, an
            ``ElicitResult`` out).

    Yields:
        The live :class:`Session`; after the block, :attr:`Session.run_ids` lists every
        segment's run in order and :attr:`Session.run_id` is the last one (the chain's
        head; the only one for a session shorter than a segment).

    Raises:
        InputError: a bad root, ``segment_calls`` is not a whole number >= 0, an
            unknown grounding level or a bad minimum, or a ``principal`` that is not
            ``Type::id`` (:class:`~toolproof.tools.policy.PolicyError`); a
            ``session_id`` that names an unfinished session without ``resume``, or a
            finished one (a session id names one session: its keys would repeat),
            refused before anything runs (:func:`~toolproof.runs.resume.check_session_start`).
        RecordingError: the session or one of its runs cannot be written (that
            segment and every later one are kept live for ``toolproof verify
            --recover``).
        ReplayRefused: resumed, the agent diverged from the recorded steps.

    """
    if principal is not None:
        principal_entity(principal)  # a bad principal is refused before anything opens
    name = "" if session_id is None else check_session_id(session_id)
    if resume and not name:
        raise InputError("resume=True needs the session_id of the session to resume")
    if name:  # an unfinished session resumes; a finished one's id is not reused
        check_session_start(Path(root), name, resume, "resume=True")
    given = Askers(sample, elicit)
    async with toolset_of(source, given) as toolset:
        chosen = _grounding(toolset, grounding, min_quote_words)
        presented = present(tool.spec for tool in toolset.exposed())  # what replay needs
        options: dict[str, Any] = {
            "approver": approver,
            "grounding": chosen,
            "principal": principal,
            "askers": given.over(toolset.resources.get(ASKERS)),
        }
        session: Session
        resumption = None
        if resume:
            live, resumption = await resume_recording(
                Path(root),
                name,
                toolset,
                task=task,
                segment_calls=segment_calls,
                presented=presented,
            )
            for item in resumption.resumed.dropped:  # kept in the run's recovery.json too
                logger.warning("session %r resumes without what recovery dropped: %s", name, item)
            session = ResumedSession(toolset, live, resumption, **options)
        else:
            live = SegmentedRecording(
                Path(root),
                toolset,
                task=task,
                segment_calls=segment_calls,
                presented=presented,
                name=name,
            )
            session = Session(toolset, live, **options)
        try:
            yield session
        except BaseException:
            await live.abort()
            raise
        outcomes = await live.finish()
        earlier = [] if resumption is None else resumption.run_ids
        session.run_ids = earlier + [outcome.run_id for outcome in outcomes]
        session.run_id = session.run_ids[-1]


@dataclass(frozen=True)
class AgentReplay:
    """What :func:`replay_session` found.

    Attributes:
        run_id: the replayed run.
        identical: every recorded call was asked for again (tool, arguments,
            occurrence) and the answer is the recorded one.
        calls: tool calls served from the recording.
        live_calls: tool bodies run: always 0.
        verified: the recorded run re-verifies.
        turns: model turns served from the recording (no model was asked).
        segments: the runs replayed: 1, or the segments of the chain (``chain=True``).
        forked: with ``then="live"``, the new run (:class:`ForkedRun`); else ``None``.

    """

    run_id: str
    identical: bool
    calls: int
    live_calls: int
    verified: bool
    turns: int = 0
    segments: int = 1
    forked: ForkedRun | None = None


@dataclass(frozen=True)
class ForkedRun:
    """The new run of ``replay_session(..., then="live")`` (docs/agents.md "Fork").

    Attributes:
        run_id: the new run's id (``ROOT/runs/<run_id>``).
        forked_from: its runtime's ``forked_from``: the parent, the divergence event
            and the refusal (``event`` ``None``: the agent never diverged).
        live_calls: tool bodies run after the fork.
        live_turns: model turns asked of a live model after the fork.

    """

    run_id: str
    forked_from: ForkedFrom
    live_calls: int
    live_turns: int


async def _run_frozen(
    agent: Callable[[Session], Coroutine[Any, Any, None]], session: Session, frozen: FrozenSession
) -> None:
    """Run the agent; a refusal it caused wins over whatever a framework made of it."""
    try:
        await agent(session)
    except Exception:
        if frozen.refused is not None:
            raise frozen.refused from None
        raise
    if frozen.refused is not None:  # the agent (or its framework) swallowed it
        raise frozen.refused


def _check_tools(frozen: FrozenSession, current: Toolset) -> None:
    """Refuse a replay whose Toolset is not the recorded one, naming every change.

    Raises:
        ReplayRefused: the descriptor changed (rule ``runtime descriptor``): the
            message names the changed tools and, for a run that stores its tools,
            every field of them the agent's framework would now be shown otherwise.

    """
    recorded = frozen.descriptor
    if recorded is None or current.descriptor().id == recorded.id:
        return
    change = describe_descriptor_change(recorded, current.descriptor())
    if frozen.presented is not None:
        now = presented_changes(frozen.presented, present(t.spec for t in current.exposed()))
        if now:
            change += (
                "; the tools as presented to the agent's framework differ from the recorded "
                f"ones: {'; '.join(now)}"
            )
    raise ReplayRefused(
        f"frozen replay refused: the runtime descriptor changed: {change}",
        rule="runtime descriptor",
    )


async def replay_session(
    run_dir: str | Path,
    agent: Callable[[Session], Coroutine[Any, Any, None]],
    *,
    toolset: Toolset | str | Path | None = None,
    chain: bool = False,
    then: Literal["frozen", "live"] = "frozen",
    root: str | Path | None = None,
) -> AgentReplay:
    """Run ``agent`` against a recorded session, frozen: no tool body runs.

    The run is verified first. Tool calls are matched by tool, canonical arguments
    and occurrence; the answer must equal the recorded one.

    With ``chain=True``, ``run_dir`` is the head (last segment) of a session sealed
    into segments (docs/runs.md "Segments"): the whole chain is verified first
    (:func:`~toolproof.runs.chain.verify_chain`), then the agent is served every
    segment's calls and model turns in order, from segment 1 to the head, with only the
    segment being served in memory; the next one opens when the agent asks past the
    current one's last step. A run without ``segment.json`` is a chain of one. Without
    ``chain`` (the default), only ``run_dir``'s own calls are served, as for any run.

    Args:
        run_dir: the run directory (``ROOT/runs/<run_id>``).
        agent: the agent code, ``async (Session) -> None``.
        toolset: the current Toolset (or ``toolproof.toml``), checked against the
            recording: its descriptor must equal the recorded one (a refusal names
            every field of the tools as presented that differs). ``None``: the agent
            sees the tools the run stores as presented (``runtime.json``'s
            ``presented``); a run recorded before runs stored them gets the recorded
            tool names with an open ``{"type": "object"}`` schema. No tool of it is
            ever called.
        chain: ``run_dir`` is the head of a sealed session's chain: verify the chain,
            then replay every segment in order (see above); ``False``: this run only.
        then: ``"frozen"`` (the default): a divergence refuses. ``"live"``: fork at the
            first divergence (docs/agents.md "Fork at the first divergence"): the
            recording is served, and recorded again in a new run, until the matcher's
            first refusal (or the first call of a tool whose descriptor changed); from
            it on the agent runs live over ``toolset`` (required: its tools run and its
            descriptor may differ), recorded in the same new run, whose runtime's
            ``forked_from`` names this run, the divergence event and the refusal. With
            ``chain``, the whole chain is served until the first divergence; the new run
            (sealed into segments when long) names the segment the agent diverged in.
        root: with ``then="live"``, the artifact root of the new run; ``None``: the
            replayed run's (``ROOT`` of ``ROOT/runs/<run_id>``).

    Returns:
        The :class:`AgentReplay` (``identical`` is ``False`` for a fork that diverged;
        ``calls`` and ``turns`` count what was served before the fork).

    Raises:
        ReplayRefused: ``run_dir`` is not a directory, the run does not verify, the
            Toolset's descriptor changed (with the presented tools' field-level
            changes), or
            the agent diverged: an unrecorded
            or extra call (naming the recorded event index, with a unified diff), a
            recorded call it never made, or a different answer. With ``chain``, a
            refusal of the agent names the segment (``in segment 2 of 3 (run
            run_...)``), and a chain that does not hold (a segment that does not
            verify, a broken link, a missing predecessor) refuses with the chain's
            problem before the agent runs. With ``then="live"`` nothing the agent
            asks refuses (only the run's verification).
        InputError: ``then`` is neither ``"frozen"`` nor ``"live"``; ``then="live"``
            without ``toolset``.
        RecordingError: the new run cannot be written.

    """
    directory = Path(run_dir)
    if then not in ("frozen", "live"):
        raise InputError(f"then={then!r}: expected 'frozen' or 'live'", rule="then")
    if then == "live" and toolset is None:
        raise InputError(
            "then='live' calls the tools live after the fork: it needs toolset= (the "
            "Toolset or toolproof.toml; toolproof replay --then-live --config)",
            rule="then",
        )
    if not directory.is_dir():
        raise ReplayRefused(
            f"frozen replay refused: no run directory at {directory} "
            "(rule: run_dir is a run directory, ROOT/runs/<run_id>)",
            check="verify",
        )
    frozen = FrozenSession.load_chain(directory) if chain else FrozenSession.load(directory)
    if then == "live":
        assert toolset is not None
        parent_root = directory.parent.parent if root is None else Path(root)
        return await _fork(directory, frozen, agent, toolset, parent_root, chain=chain)
    if toolset is None:
        session = Session(None, None, frozen)
        await _run_frozen(agent, session, frozen)
    else:
        async with toolset_of(toolset) as current:
            _check_tools(frozen, current)
            session = Session(current, None, frozen)
            await _run_frozen(agent, session, frozen)
    frozen.finish(session.answered)
    served, turns = frozen.calls_served, frozen.turns_served
    return AgentReplay(
        directory.name, True, served, session.live_calls, True, turns, frozen.segments
    )


async def _fork(
    directory: Path,
    frozen: FrozenSession,
    agent: Callable[[Session], Coroutine[Any, Any, None]],
    toolset: Toolset | str | Path,
    root: Path,
    *,
    chain: bool = False,
) -> AgentReplay:
    """Serve ``frozen`` to ``agent`` until the first divergence, then live: a new run.

    A fork of one run is one run; of a chain (``chain``), a session of any length, it
    is sealed into segments as ``record_session`` seals one (the default size), and
    :class:`ForkedRun` names the head.
    """
    view = RunView(directory)
    task = view.spec.task if view.spec is not None else SESSION_TASK
    async with toolset_of(toolset) as current:
        presented = present(tool.spec for tool in current.exposed())
        size = DEFAULT_SEGMENT_CALLS if chain else 0
        live = SegmentedRecording(root, current, task=task, segment_calls=size, presented=presented)
        session = ForkedSession(
            current,
            live,
            frozen,
            changed=changed_tools(frozen.descriptor, current),
            grounding=_grounding(current, None, None),
        )
        try:
            await agent(session)
            forked_from = session.settle()
        except BaseException:
            await live.abort()
            raise
        outcomes = await live.finish()
    child = ForkedRun(outcomes[-1].run_id, forked_from, session.live_calls, session.live_turns)
    identical = forked_from.event is None
    served, turns = session.served_calls, session.served_turns
    segments = frozen.segments
    return AgentReplay(directory.name, identical, served, 0, True, turns, segments, child)
