"""Agent sessions: record an in-process agent's tool calls and answer as a run; replay it frozen.

:func:`record_session` opens a live session (:mod:`toolproof.runs.session`, the
recorder ``serve --record`` uses) over a Toolset and yields a :class:`Session`; the
agent reaches the tools through the session's adapters
(:meth:`Session.pydantic_ai_toolset`, :attr:`Session.toolset`), every call recorded
as a call step before its result is handed back. :meth:`Session.answer` gives the
final answer, whose quotes are checked byte for byte (:mod:`toolproof.evidence.answer`).
When the ``async with`` block ends, the session is finalized into
``ROOT/runs/<run_id>`` (:attr:`Session.run_id`), verifiable with ``toolproof verify``.

:func:`replay_session` runs the same agent code against the recording: tool calls
are matched by tool, canonical arguments and occurrence (so concurrent and repeated
identical calls replay), served from the recorded results, and no tool body runs; the
first divergence refuses with :class:`~toolproof.errors.ReplayRefused` naming the
recorded event index and a unified diff of recorded vs asked.

Model turns are recorded too when the agent's model goes through one of the session's
model recorders (:meth:`Session.pydantic_ai_model`, :meth:`Session.openai_agents_model`,
:meth:`Session.httpx_transport`): each is a ``model`` step whose request and response
bytes are evidence; frozen, the recorded response is served by match key
(:mod:`toolproof.runs.turns`) and occurrence, and no model is asked.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Protocol

from toolproof.config import load_toolset
from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.tools import ToolResult, ToolsetDescriptor, ToolSpec
from toolproof.contract.trace import (
    EvidenceRegistered,
    ModelTurn,
    PromptGot,
    ResourceRead,
    StepFinished,
    ToolCalled,
    ToolReturned,
)
from toolproof.errors import InputError, ReplayRefused, ToolCallError
from toolproof.evidence.answer import QuoteCitation
from toolproof.extensions.approvals.request import Approver, approval_scope
from toolproof.identity import canonical_json
from toolproof.runs.finalize import ANSWER_FILE, finalize_session
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.replay import describe_descriptor_change
from toolproof.runs.session import LiveSession, admission_sorted, discard_live, open_session
from toolproof.runs.turns import exchange_key, key_text
from toolproof.tools import hooks
from toolproof.tools.exposure import GATE_EXTENSION, is_gated
from toolproof.tools.observe import observe_failures
from toolproof.tools.toolset import Toolset
from toolproof.verify.verifier import verify_run
from toolproof.verify.view import RunView

__all__ = [
    "ANSWER_FILE",
    "AgentReplay",
    "CassetteLike",
    "RecordedTurn",
    "Session",
    "SessionTool",
    "record_session",
    "replay_session",
]


@dataclass(frozen=True)
class SessionTool:
    """One tool as a session presents it: its exact spec, and a recorded call.

    Attributes:
        spec: the tool's (or variant's) spec, schemas exactly as bound.

    """

    spec: ToolSpec
    _session: Session

    @property
    def name(self) -> str:
        """The tool name."""
        return self.spec.name

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        """Call the tool through the session (recorded, or served frozen)."""
        return await self._session.call(self.spec.name, arguments)


class CassetteLike(Protocol):
    """What :meth:`Session.from_cassette` needs (``toolproof.testing.Cassette`` is one)."""

    @property
    def frozen(self) -> bool:
        """Whether model turns are served (``True``) or asked live and recorded."""
        ...

    def toolset(self, base: Toolset | None = None) -> Toolset:
        """A Toolset whose tools answer from the cassette."""
        ...

    def serve_turn(self, source: str, key: bytes) -> Any:
        """The next recorded turn with match key ``key``: its ``response`` and ``detail``."""
        ...

    def known_turn(self, source: str, key: bytes) -> Any | None:
        """Like :meth:`serve_turn`, but ``None`` instead of a miss (recording new episodes)."""
        ...

    def admit_turn(self, source: str) -> str:
        """Check that a live model turn can be recorded; the step it will be recorded as."""
        ...

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """Record a live model turn under ``step`` (from :meth:`admit_turn`); its step id."""
        ...


def _needs_extra(method: str, what: str, extra: str, exc: ImportError) -> InputError:
    """The error of ``session.<method>()`` when its optional framework is not installed."""
    return InputError(f"session.{method}() needs {what}: pip install 'toolproof[{extra}]' ({exc})")


@dataclass
class _Frozen:
    """Recorded calls to serve, by (tool, canonical arguments), in the order they were asked."""

    calls: dict[tuple[str, bytes], list[tuple[int, ToolResult]]]
    """Recorded results by (tool, canonical arguments), each with its ``tool_called``
    event index, in the order the calls were admitted (asked)."""
    pending: dict[int, tuple[str, bytes]]
    """(tool, canonical arguments) of each call not served yet, by event index, recorded order."""
    answer: dict[str, Any] | None
    turns: dict[tuple[str, bytes], list[tuple[int, RecordedTurn]]] = field(default_factory=dict)
    """Recorded model turns by (source, match key), in the order they were asked."""
    pending_turns: dict[int, tuple[str, bytes]] = field(default_factory=dict)
    """(source, match key) of every turn not served yet, by event index, in recorded order."""
    served_turns: dict[tuple[str, bytes], int] = field(default_factory=dict)
    specs: tuple[ToolSpec, ...] = ()
    descriptor: ToolsetDescriptor | None = None
    gated: frozenset[str] = frozenset()
    """The recorded tools whose layer chain holds ``approve``."""
    refused: ReplayRefused | None = None
    """The first refusal, kept so a framework that wraps or swallows it cannot hide it."""
    served: dict[tuple[str, bytes], int] = field(default_factory=dict)
    end: int = 0
    reads: dict[bytes, list[dict[str, Any]]] = field(default_factory=dict)
    """Recorded resource reads and prompt gets by canonical request, in recorded order."""


def _citation(given: dict[str, Any]) -> dict[str, Any]:
    dumped = QuoteCitation.model_validate(given).model_dump()
    if dumped["read"] is None:  # a call's citation keeps the shape it always had
        del dumped["read"]
    return dumped


@dataclass(frozen=True)
class RecordedTurn:
    """A recorded model turn as frozen replay serves it.

    Attributes:
        response: the exact response bytes.
        detail: the ``model_turn`` event's detail (HTTP: status and kept headers).

    """

    response: bytes
    detail: dict[str, Any]


def _diff(recorded: str, asked: str) -> str:
    lines = difflib.unified_diff(
        recorded.splitlines(), asked.splitlines(), "recorded", "asked", lineterm=""
    )
    return "\n".join(lines)


def _call_text(tool: str, canonical_arguments: bytes) -> str:
    arguments = json.loads(canonical_arguments)
    return json.dumps({"tool": tool, "arguments": arguments}, indent=2, sort_keys=True)


class Session:
    """An agent's session: tools that record (or replay frozen) and the final answer.

    Build it with :func:`record_session` (live) or let :func:`replay_session` build a
    frozen one; pass it to the agent code.

    Attributes:
        run_id: the committed run's id, once the ``record_session`` block has ended.
        live_calls: tool bodies run (always 0 when frozen).
        live_turns: model turns asked of a live model (always 0 when frozen).

    """

    def __init__(
        self,
        toolset: Toolset | None,
        live: LiveSession | None,
        frozen: _Frozen | None = None,
        approver: Approver | None = None,
    ) -> None:
        self._approver = approver
        self._toolset = toolset
        self._live = live
        self._frozen = frozen
        self.run_id: str | None = None
        self.live_calls = 0
        self.live_turns = 0
        self.answered: dict[str, Any] | None = None
        self._cassette: CassetteLike | None = None

    @classmethod
    def from_cassette(cls, cassette: CassetteLike, toolset: Toolset | None = None) -> Session:
        """A session served by a cassette (``toolproof.testing.Cassette``), for an app's tests.

        The agent code runs as it does live: its tool calls go to
        ``cassette.toolset(toolset)`` (served in recorded order; a miss fails closed; a
        recording cassette runs the real tool and records it) and its model turns, through
        the session's model recorders, to the cassette (``serve_turn``, or ``admit_turn``
        and ``record_turn`` while it records). Nothing is recorded in a run of its own:
        the cassette's record mode decides (docs/extending.md).

        Args:
            cassette: the cassette.
            toolset: the real Toolset (its specs are what the agent sees; its tools run only
                when the cassette records). ``None``: the recorded tool names, open schemas.

        Raises:
            InputError: the cassette records and ``toolset`` is ``None``.

        """
        session = cls(cassette.toolset(toolset), None)
        session._cassette = cassette
        return session

    @property
    def frozen(self) -> bool:
        """Whether results are served from a recording (no tool body runs, no model is asked)."""
        if self._cassette is not None:
            return self._cassette.frozen
        return self._frozen is not None

    @property
    def toolset(self) -> Mapping[str, SessionTool]:
        """Every exposed tool and variant of the Toolset, by name, as recorded callables."""
        return {spec.name: SessionTool(spec, self) for spec in self.tool_specs()}

    def is_gated(self, name: str) -> bool:
        """Whether tool ``name`` is gated by ``approve`` (its layer chain holds the wrapper).

        The framework adapters map a gated call the gate defers to the framework's own
        deferral (pydantic-ai ``ApprovalRequired``, the Agents SDK's interruption).
        """
        if self._toolset is None:
            assert self._frozen is not None
            return name in self._frozen.gated
        tool = self._toolset.get(name)
        return tool is not None and is_gated(tool)

    def tool_specs(self) -> list[ToolSpec]:
        """The specs of every exposed tool and variant, in the Toolset's order.

        The ungated siblings of an ``approve``-gated variant are not among them unless
        ``[serve] expose`` names them (:meth:`Toolset.exposed
        <toolproof.tools.toolset.Toolset.exposed>`).
        """
        if self._toolset is None:  # frozen without a Toolset: the recorded names
            assert self._frozen is not None
            return list(self._frozen.specs)
        return [tool.spec for tool in self._toolset.exposed()]

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call tool ``name`` with the caller's ``arguments``, recorded before it returns.

        Returns:
            The tool's result; a failure (``invalid_arguments``, ``unrecordable``...) is
            a result, not an exception.

        Raises:
            ReplayRefused: frozen, and this call was not recorded (the message names the
                recorded event index and has a unified diff of recorded vs asked).

        """
        if self._frozen is not None:
            return self._serve(name, arguments)
        if self._cassette is not None:  # the cassette's tools serve (or record) the call
            assert self._toolset is not None
            served = self._toolset.get(name)
            if served is None:
                known = ", ".join(self._toolset.names())
                return ToolResult.fail(
                    "unknown_tool", f"no tool {name!r} in this session (known: {known})"
                )
            return await served.call(arguments)
        assert self._live is not None and self._toolset is not None
        tool = self._toolset.exposed_tool(name)
        if tool is None:  # a hidden tool reads exactly like an unknown one
            known = ", ".join(other.name for other in self._toolset.exposed())
            return ToolResult.fail(
                "unknown_tool", f"no tool {name!r} in this session (known: {known})"
            )
        try:
            admission = self._live.admit(name, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        self.live_calls += 1
        call_id = admission.recorded_id or admission.call_id  # a span names it (telemetry)
        with observe_failures() as seen, approval_scope(call_id, self._approver):
            if hooks.ACTIVE is None:  # only a telemetry hook reads the claimed call id
                result = await tool.call(arguments)
            else:
                with hooks.claimed(call_id):
                    result = await tool.call(arguments)
        try:
            return self._live.record(admission, result, seen).result
        except ToolCallError as unrecorded:
            return ToolResult(ok=False, failure=unrecorded.failure)

    def _serve(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        frozen = self._frozen
        assert frozen is not None
        try:
            key = (name, canonical_json(arguments))
        except InputError as exc:
            raise ReplayRefused(
                f"frozen replay refused: the agent called {name!r} with arguments that have "
                f"no canonical JSON form ({exc.message})",
                rule="arguments",
            ) from None
        taken = frozen.served.get(key, 0)
        recorded = frozen.calls.get(key, [])
        if taken < len(recorded):
            frozen.served[key] = taken + 1
            index, result = recorded[taken]
            frozen.pending.pop(index, None)
            return result
        if frozen.pending:
            index, (tool, raw) = next(iter(frozen.pending.items()))
            expected = _call_text(tool, raw)
        else:
            index, expected = frozen.end, ""
        asked = _call_text(name, key[1])
        what = "an extra call" if key in frozen.calls else "an unrecorded call"
        frozen.refused = ReplayRefused(
            f"frozen replay refused at event {index}: the agent made {what} to {name!r} "
            f"(occurrence {taken + 1}); a live call would be a new run\n"
            f"{_diff(expected, asked)}",
            event=index,
            rule="call",
        )
        raise frozen.refused

    def known_turn(self, source: str, key: bytes) -> RecordedTurn | None:
        """The recorded turn a model recorder serves instead of asking its model, if any.

        Args:
            source: ``pydantic-ai``, ``openai-agents`` or ``http``.
            key: the asked request's match key (:func:`toolproof.runs.turns.turn_key`).

        Returns:
            Frozen, what :meth:`serve_turn` serves. Served by a cassette that records
            (mode ``new_episodes``, or ``once`` with no cassette yet), the next unserved
            recorded turn with this key, or ``None`` when it has none (the model is asked
            live and the turn recorded, as VCR's ``new_episodes`` does). Live, ``None``.

        Raises:
            ReplayRefused: frozen, and the request matches no unserved recorded turn.
            InputError: served by a cassette that does not record, and it misses.

        """
        if self._cassette is not None and not self._cassette.frozen:
            found = self._cassette.known_turn(source, key)
            return None if found is None else RecordedTurn(found.response, dict(found.detail))
        if self.frozen:
            return self.serve_turn(source, key)
        return None

    def admit_turn(self, source: str) -> str:
        """Check, before a live model is asked, that its turn can be recorded.

        Returns:
            The step the turn will be recorded as (``turn-00000001`` and up), numbered
            now, in the order turns are asked: hand it to :meth:`record_turn`. Frozen
            replay serves repeated identical requests by this order.

        Raises:
            RecordingError: it cannot (a broken or closed session, a full disk).
            InputError: the session is frozen (no model is asked then).

        """
        if self._cassette is not None:
            step = self._cassette.admit_turn(source)
            self.live_turns += 1
            return step
        if self._live is None:
            raise InputError(
                f"a frozen session asks no {source} model: use serve_turn", rule="frozen"
            )
        step = self._live.admit_turn(source)
        self.live_turns += 1
        return step

    def record_turn(self, turn: ModelExchange, step: str = "") -> str:
        """Record one model turn (a model recorder's request and response) as a ``model`` step.

        Args:
            turn: the exchange.
            step: the step :meth:`admit_turn` returned for the turn; ``""``: numbered now.

        Returns:
            The step id, ``turn-00000001`` and up.

        Raises:
            RecordingError: it cannot be written; the session records nothing more.
            InputError: the session is frozen.

        """
        if self._cassette is not None:
            return self._cassette.record_turn(turn, step)
        if self._live is None:
            raise InputError(f"a frozen session records no {turn.source} model turn", rule="frozen")
        return self._live.record_turn(turn, step)

    def serve_turn(self, source: str, key: bytes) -> RecordedTurn:
        """Frozen: the recorded turn of ``source`` whose match key is ``key``, in occurrence order.

        Occurrences count in the order the turns were *asked* when recorded (their
        admission numbers, ``turn-0000000N``), not the order they were answered: the
        k-th identical request asked now gets the response of the k-th one asked then.

        Args:
            source: ``pydantic-ai``, ``openai-agents`` or ``http``.
            key: the asked request's match key (:func:`toolproof.runs.turns.turn_key`).

        Raises:
            ReplayRefused: no such turn was recorded, or every recorded one was served
                already (naming the recorded event index of the next unserved turn, with
                a unified diff of its match key and the asked one).
            InputError: the session is live; or, served by a cassette, the cassette
                misses (rule ``cassette miss``, with the nearest recorded request's diff).

        """
        if self._cassette is not None:
            served = self._cassette.serve_turn(source, key)
            return RecordedTurn(served.response, dict(served.detail))
        frozen = self._frozen
        if frozen is None:
            raise InputError(f"a live session serves no recorded {source} turn", rule="live")
        entry = (source, key)
        taken = frozen.served_turns.get(entry, 0)
        recorded = frozen.turns.get(entry, [])
        if taken < len(recorded):
            frozen.served_turns[entry] = taken + 1
            index, turn = recorded[taken]
            frozen.pending_turns.pop(index, None)
            return turn
        if frozen.pending_turns:
            index, (_, expected) = next(iter(frozen.pending_turns.items()))
            expected_text = key_text(expected)
        else:
            index, expected_text = frozen.end, ""
        what = "an extra" if entry in frozen.turns else "an unrecorded"
        hint = ""
        if self._toolset is None:
            hint = (
                " (this replay has no toolset=, so the agent sees the recorded tool names "
                "with open schemas: pass the Toolset, replay_session(..., toolset=...) or "
                "toolproof replay --config toolproof.toml)"
            )
        frozen.refused = ReplayRefused(
            f"frozen replay refused at event {index}: the agent made {what} {source} model "
            f"request (occurrence {taken + 1}); a live model turn would be a new run{hint}\n"
            f"{_diff(expected_text, key_text(key))}",
            event=index,
            rule="model turn",
        )
        raise frozen.refused

    def pydantic_ai_model(self, model: Any) -> Any:
        """``model`` (a pydantic-ai ``Model`` or model name) wrapped so each turn is recorded.

        Live, each ``request`` is passed to ``model`` and its request and response are
        recorded as a model turn (pydantic-ai's own objects as canonical JSON); frozen,
        the response is served from the recording and ``model`` is never asked.
        Streaming requests are refused (:mod:`toolproof.adapters.pydantic_ai_model`).

        Raises:
            InputError: pydantic-ai is not installed (``pip install 'toolproof[pydantic-ai]'``).

        """
        try:
            from toolproof.adapters.pydantic_ai_model import RecordedModel
        except ImportError as exc:
            raise _needs_extra("pydantic_ai_model", "pydantic-ai", "pydantic-ai", exc) from exc
        return RecordedModel(model, self)

    def openai_agents_model(self, model: Any) -> Any:
        """``model`` (an OpenAI Agents SDK ``Model``) wrapped so each turn is recorded.

        Raises:
            InputError: the SDK is not installed (``pip install 'toolproof[openai-agents]'``).

        """
        try:
            from toolproof.adapters.openai_agents_model import RecordedAgentsModel
        except ImportError as exc:
            raise _needs_extra(
                "openai_agents_model", "the OpenAI Agents SDK", "openai-agents", exc
            ) from exc
        return RecordedAgentsModel(model, self)

    def httpx_transport(self, inner: Any = None) -> Any:
        """An ``httpx.AsyncBaseTransport`` recording every exchange as a model turn.

        Args:
            inner: the transport that reaches the network live (default
                ``httpx.AsyncHTTPTransport()``); frozen it is never used.

        Returns:
            The transport, for ``httpx.AsyncClient(transport=...)`` (the ``openai`` and
            ``anthropic`` SDKs take such a client as ``http_client=``).

        """
        from toolproof.adapters.httpx_transport import RecordingTransport

        return RecordingTransport(self, inner)

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """Read resource ``uri`` of the Toolset's catalog, recorded as a ``read`` step.

        Returns:
            The ``ReadResourceResult`` in wire form (``{"contents": [...]}``); quote it
            in the answer as ``"..." [read_N]`` (N: the N-th read of the session).

        Raises:
            InputError: no resource or template lists ``uri``.
            ToolCallError: the read cannot be recorded (kind ``unrecordable``).
            ReplayRefused: frozen, and this read was not recorded.

        """
        request = {"method": "resources/read", "uri": uri}
        if self._frozen is not None:
            return self._serve_read(request)
        assert self._live is not None and self._toolset is not None
        entry = self._toolset.catalog.resource_for(uri)
        if entry is None:
            raise InputError(f"resource {uri!r}: no resource or template lists it", uri=uri)
        result = await entry.answer(uri)
        self._live.record_read(uri, result)
        return result

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Get prompt ``name`` with ``arguments``, recorded as a ``prompt`` step.

        Returns:
            The ``GetPromptResult`` in wire form (``{"messages": [...]}``).

        Raises:
            InputError: no such prompt.
            ToolCallError: the get cannot be recorded (kind ``unrecordable``).
            ReplayRefused: frozen, and this get was not recorded.

        """
        request = {"method": "prompts/get", "name": name, "arguments": dict(arguments or {})}
        if self._frozen is not None:
            return self._serve_read(request)
        assert self._live is not None and self._toolset is not None
        entry = self._toolset.catalog.prompts.get(name)
        if entry is None:
            raise InputError(f"prompt {name!r}: no such prompt", prompt=name)
        result = await entry.answer(arguments or None)
        self._live.record_prompt(name, dict(arguments or {}), result)
        return result

    def _serve_read(self, request: dict[str, Any]) -> dict[str, Any]:
        frozen = self._frozen
        assert frozen is not None
        key = canonical_json(request)
        recorded = frozen.reads.get(key, [])
        if not recorded:
            frozen.refused = ReplayRefused(
                f"frozen replay refused: the agent asked {request}, which the recording "
                "does not hold; a live read would be a new run",
                rule="read",
            )
            raise frozen.refused
        return recorded.pop(0)

    def answer(self, text: str, citations: list[dict[str, Any]] | None = None) -> None:
        """Give the agent's final answer; its quotes become the run's claim.

        Args:
            text: the answer. Without ``citations``, quotes are read from it in the
                syntax ``"quote" [call_N]`` (N: the N-th recorded call, from 1).
            citations: explicit ``{"call": "call_N", "quote": ...}`` or ``{"tool":
                name, "occurrence": n, "quote": ...}`` objects.

        Raises:
            InputError: a malformed citation, or a second answer.

        """
        if self.answered is not None:
            raise InputError("the session already has an answer", rule="one answer")
        try:
            checked = [_citation(c) for c in citations or []]
        except ValueError as exc:
            raise InputError(f"bad citation: {exc}", rule="citation") from None
        self.answered = {"answer": text, "citations": checked}
        if self._live is not None:
            data = canonical_json(self.answered)
            (self._live.directory / ANSWER_FILE).write_bytes(data)

    def langchain_tools(self) -> list[Any]:
        """The session's tools as coroutine-only LangChain ``StructuredTool`` s (needs langchain).

        Each keeps the tool's exact declared schema and hands the caller's arguments
        unchanged to :meth:`call` (recorded, or served frozen); a failure raises
        ``ToolException`` (:mod:`toolproof.adapters.langchain`).

        Raises:
            InputError: langchain-core is not installed, or a frozen replay was started
                without ``toolset=`` (the tools' schemas are needed).

        """
        if self._toolset is None:
            raise InputError(
                "session.langchain_tools() in a frozen replay needs the Toolset: pass "
                "replay_session(..., toolset=...) or toolproof replay --config toolproof.toml",
                rule="toolset",
            )
        try:
            from toolproof.adapters.langchain import as_structured_tool
        except ImportError as exc:
            raise _needs_extra("langchain_tools", "langchain", "langchain", exc) from exc
        return [
            as_structured_tool(tool, call=functools.partial(self.call, tool.name))
            for tool in self._toolset.exposed()
        ]

    def openai_agents_tools(self) -> list[Any]:
        """The session's tools as OpenAI Agents SDK ``FunctionTool`` s (needs ``openai-agents``).

        Raises:
            InputError: the SDK is not installed (``pip install 'toolproof[openai-agents]'``).

        """
        try:
            from toolproof.adapters.openai_agents_session import session_function_tools
        except ImportError as exc:
            raise _needs_extra(
                "openai_agents_tools", "the OpenAI Agents SDK", "openai-agents", exc
            ) from exc
        return session_function_tools(self)

    def pydantic_ai_toolset(self) -> Any:
        """The session's tools as a pydantic-ai ``AbstractToolset`` (needs ``pydantic-ai``).

        Raises:
            InputError: pydantic-ai is not installed (``pip install 'toolproof[pydantic-ai]'``).

        """
        try:
            from toolproof.adapters.pydantic_ai_session import SessionToolset
        except ImportError as exc:
            raise _needs_extra("pydantic_ai_toolset", "pydantic-ai", "pydantic-ai", exc) from exc
        return SessionToolset(self)


@asynccontextmanager
async def _toolset_of(source: Toolset | str | Path) -> AsyncIterator[Toolset]:
    if isinstance(source, Toolset):
        yield source
        return
    async with load_toolset(Path(source)) as toolset:
        yield toolset


@asynccontextmanager
async def record_session(
    source: Toolset | str | Path,
    *,
    root: str | Path,
    task: str,
    approver: Approver | None = None,
) -> AsyncIterator[Session]:
    """Record an agent's session over a Toolset (or a ``toolproof.toml``) as a run.

    Args:
        source: a sealed Toolset, or the path of a ``toolproof.toml``.
        root: the artifact root (the run lands in ``root/runs/<run_id>``).
        task: what the agent was asked (the run spec's task).
        approver: the Python approval channel for the ``approve`` layers of this
            session's calls (``async approver(request) -> bool | Decision``, see
            docs/approvals.md); it takes precedence over ``load_toolset(approver=)``.
            ``None``: the Toolset's callback, or decisions from the store.

    Yields:
        The live :class:`Session`; after the block, :attr:`Session.run_id` is set.

    Raises:
        InputError: a bad root.
        RecordingError: the session or its run cannot be written.

    """
    async with _toolset_of(source) as toolset:
        live = open_session(Path(root), toolset, task=task)
        session = Session(toolset, live, approver=approver)
        try:
            yield session
        except BaseException:
            live.close()
            if live.calls == 0:
                discard_live(live.directory)
            raise
        live.close()
        outcome = await finalize_session(live.directory, Path(root))
        session.run_id = outcome.run_id


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

    """

    run_id: str
    identical: bool
    calls: int
    live_calls: int
    verified: bool
    turns: int = 0


def _recorded(directory: Path) -> _Frozen:
    verification = verify_run(directory)
    if not verification.ok:
        first = verification.failures[0]
        raise ReplayRefused(f"frozen replay refused: {first}", check="verify")
    view = RunView(directory)
    events = view.events or []
    # repeated identical calls (and turns) are served in the order they were asked:
    # by admission number (the step's), not by trace position (the order answered)
    called_steps: dict[tuple[str, bytes], list[tuple[str, int, ToolResult]]] = {}
    pending: dict[int, tuple[str, bytes]] = {}
    called: dict[str, tuple[int, str, bytes, str]] = {}
    for event in events:
        if isinstance(event, ToolCalled):
            raw = canonical_json(dict(event.call.arguments))
            called[event.call_id] = (event.idx, event.call.tool, raw, event.step)
        elif isinstance(event, ToolReturned) and event.call_id in called:
            index, tool, raw, step = called[event.call_id]
            called_steps.setdefault((tool, raw), []).append((step, index, event.result))
            pending[index] = (tool, raw)
    calls = {
        key: [(index, result) for _, index, result in admission_sorted(found, itemgetter(0))]
        for key, found in called_steps.items()
    }
    asked_turns: dict[tuple[str, bytes], list[tuple[str, int, RecordedTurn]]] = {}
    pending_turns: dict[int, tuple[str, bytes]] = {}
    registered: dict[str, EvidenceRecord] = {}
    for event in events:
        if isinstance(event, EvidenceRegistered):
            registered[event.evidence.id] = event.evidence
        elif isinstance(event, ModelTurn):
            request = (directory / registered[event.request].path).read_bytes()
            response = (directory / registered[event.response].path).read_bytes()
            key = exchange_key(event.source, request, dict(event.detail))
            turn = RecordedTurn(response, dict(event.detail))
            asked_turns.setdefault((event.source, key), []).append((event.step, event.idx, turn))
            pending_turns[event.idx] = (event.source, key)
    turns = {
        key: [(index, turn) for _, index, turn in admission_sorted(found, itemgetter(0))]
        for key, found in asked_turns.items()
    }
    end = next(
        (e.idx for e in events if isinstance(e, StepFinished) and e.step == "derive"), len(events)
    )
    answer = None
    if view.spec is not None and view.spec.reasoner.name == "answer":
        answer = dict(view.spec.reasoner.params)
    specs: tuple[ToolSpec, ...] = ()
    if view.runtime is not None:  # names only: without a Toolset the schemas are not known
        exposure = view.runtime.toolset.exposure
        hidden = set(exposure.hidden) if exposure is not None else set()
        specs = tuple(
            ToolSpec(name=tool.name, input_schema={"type": "object"})
            for tool in view.runtime.toolset.tools
            if tool.name not in hidden
        )
    gated = frozenset(
        tool.name
        for tool in (view.runtime.toolset.tools if view.runtime is not None else [])
        if any(layer.name == GATE_EXTENSION for layer in tool.stack)
    )
    frozen = _Frozen(
        calls, pending, answer, turns, pending_turns, specs=specs, end=end, gated=gated
    )
    for event in events:
        if isinstance(event, ResourceRead):
            asked: dict[str, Any] = {"method": "resources/read", "uri": event.uri}
        elif isinstance(event, PromptGot):
            asked = {"method": "prompts/get", "name": event.name}
            asked["arguments"] = dict(event.arguments)
        else:
            continue
        frozen.reads.setdefault(canonical_json(asked), []).append(dict(event.result))
    frozen.descriptor = view.runtime.toolset if view.runtime is not None else None
    return frozen


async def _run_frozen(
    agent: Callable[[Session], Coroutine[Any, Any, None]], session: Session, frozen: _Frozen
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


async def replay_session(
    run_dir: str | Path,
    agent: Callable[[Session], Coroutine[Any, Any, None]],
    *,
    toolset: Toolset | str | Path | None = None,
) -> AgentReplay:
    """Run ``agent`` against a recorded session, frozen: no tool body runs.

    The run is verified first. Tool calls are matched by tool, canonical arguments
    and occurrence; the answer must equal the recorded one.

    Args:
        run_dir: the run directory (``ROOT/runs/<run_id>``).
        agent: the agent code, ``async (Session) -> None``.
        toolset: the current Toolset (or ``toolproof.toml``) whose specs the agent
            sees; its descriptor must equal the recorded one. ``None``: the recorded
            tool names with an open ``{"type": "object"}`` schema. No tool of it is
            ever called.

    Returns:
        The :class:`AgentReplay`.

    Raises:
        ReplayRefused: ``run_dir`` is not a directory, the run does not verify, the
            Toolset's descriptor changed, or
            the agent diverged: an unrecorded
            or extra call (naming the recorded event index, with a unified diff), a
            recorded call it never made, or a different answer.

    """
    directory = Path(run_dir)
    if not directory.is_dir():
        raise ReplayRefused(
            f"frozen replay refused: no run directory at {directory} "
            "(rule: run_dir is a run directory, ROOT/runs/<run_id>)",
            check="verify",
        )
    frozen = _recorded(directory)
    if toolset is None:
        session = Session(None, None, frozen)
        await _run_frozen(agent, session, frozen)
    else:
        async with _toolset_of(toolset) as current:
            recorded = frozen.descriptor
            if recorded is not None and current.descriptor().id != recorded.id:
                change = describe_descriptor_change(recorded, current.descriptor())
                raise ReplayRefused(
                    f"frozen replay refused: the runtime descriptor changed: {change}",
                    rule="runtime descriptor",
                )
            session = Session(current, None, frozen)
            await _run_frozen(agent, session, frozen)
    first_call = next(iter(frozen.pending.items()), None)
    first_turn = next(iter(frozen.pending_turns.items()), None)
    if first_turn is not None and (first_call is None or first_turn[0] < first_call[0]):
        index, (source, key) = first_turn
        raise ReplayRefused(
            f"frozen replay refused at event {index}: the agent never made the recorded "
            f"{source} model request\n{_diff(key_text(key), '')}",
            event=index,
            rule="missing model turn",
        )
    if first_call is not None:
        index, (tool, raw) = first_call
        raise ReplayRefused(
            f"frozen replay refused at event {index}: the agent never made the recorded "
            f"call to {tool!r}\n{_diff(_call_text(tool, raw), '')}",
            event=index,
            rule="missing call",
        )
    recorded_answer = (frozen.answer or {}).get("answer")
    asked = (session.answered or {}).get("answer")
    if recorded_answer != asked:
        raise ReplayRefused(
            f"frozen replay refused at event {frozen.end}: the answer differs\n"
            f"{_diff(str(recorded_answer or ''), str(asked or ''))}",
            event=frozen.end,
            rule="answer",
        )
    served = sum(frozen.served.values())
    turns = sum(frozen.served_turns.values())
    return AgentReplay(directory.name, True, served, session.live_calls, True, turns)
