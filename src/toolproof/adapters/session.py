"""The agent's session: tools that record (or replay frozen), model recorders, the answer.

:func:`~toolproof.adapters.session_runs.record_session` yields a live :class:`Session`
over a Toolset; the agent reaches the tools through the session's adapters
(:meth:`Session.pydantic_ai_toolset`, :attr:`Session.toolset`), every call recorded
as a call step before its result is handed back. :meth:`Session.answer` gives the
final answer, whose quotes are checked byte for byte (:mod:`toolproof.evidence.answer`).
:func:`~toolproof.adapters.session_runs.replay_session` gives the same agent code a
frozen one (:class:`~toolproof.sessions.frozen.FrozenSession`): calls are served by
tool, canonical arguments and occurrence, and no tool body runs.

Model turns are recorded too when the agent's model goes through one of the session's
model recorders (:meth:`Session.pydantic_ai_model`, :meth:`Session.openai_agents_model`,
:meth:`Session.httpx_transport`): each is a ``model`` step whose request and response
bytes are evidence; frozen, the recorded response is served by match key
(:mod:`toolproof.runs.turns`) and occurrence, and no model is asked. A session is the one
session port (:class:`~toolproof.sessions.port.SessionPort`) the framework adapters take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolproof.adapters.session_tool import SessionTool
from toolproof.contract.tools import ToolResult, ToolSpec
from toolproof.errors import InputError, ToolCallError
from toolproof.evidence.answer import QuoteCitation
from toolproof.evidence.grounding import Grounding
from toolproof.extensions.approvals.request import Approver
from toolproof.identity import canonical_json
from toolproof.runs.finalize import ANSWER_FILE
from toolproof.runs.recorder import ModelExchange
from toolproof.runs.segments import SegmentedRecording
from toolproof.sessions.cassette import Cassette
from toolproof.sessions.frozen import FrozenSession
from toolproof.sessions.port import Asked, RecordedTurn
from toolproof.tools.asking import Askers, AskingChannel
from toolproof.tools.exposure import is_gated
from toolproof.tools.observe import observe
from toolproof.tools.policy import DEFAULT_PRINCIPAL, PolicyGate, gated_call
from toolproof.tools.toolset import Toolset
from toolproof.version import install_hint

__all__ = ["ANSWER_FILE", "RecordedTurn", "Session", "SessionTool"]


def _needs_extra(method: str, what: str, extra: str, exc: ImportError) -> InputError:
    """The error of ``session.<method>()`` when its optional framework is not installed."""
    return InputError(f"session.{method}() needs {what}: {install_hint(extra)} ({exc})")


def _citation(given: dict[str, Any]) -> dict[str, Any]:
    dumped = QuoteCitation.model_validate(given).model_dump()
    if dumped["read"] is None:  # a call's citation keeps the shape it always had
        del dumped["read"]
    return dumped


class Session:
    """An agent's session: tools that record (or replay frozen) and the final answer.

    Build it with ``record_session`` (live) or let ``replay_session`` build a frozen one
    (:mod:`toolproof.adapters.session_runs`); pass it to the agent code.

    Attributes:
        run_id: the committed run's id, once the ``record_session`` block has ended; for
            a session sealed into segments, the last segment's (the chain's head).
        run_ids: every segment's run id, in order, once the block has ended (one for a
            session shorter than a segment).
        live_calls: tool bodies run (always 0 when frozen).
        live_turns: model turns asked of a live model (always 0 when frozen).

    """

    def __init__(
        self,
        toolset: Toolset | None,
        live: SegmentedRecording | None,
        frozen: FrozenSession | None = None,
        approver: Approver | None = None,
        grounding: Grounding | None = None,
        principal: str | None = None,
        askers: Askers | None = None,
    ) -> None:
        self._approver = approver
        self._askers = askers if askers is not None and askers.answers else None
        policy = None if toolset is None or live is None else toolset.policy
        self._gate = None if policy is None else PolicyGate(policy, principal or DEFAULT_PRINCIPAL)
        self._grounding = grounding or Grounding()
        self._toolset = toolset
        self._live = live
        self._frozen = frozen
        self.run_id: str | None = None
        self.run_ids: list[str] = []
        self.live_calls = 0
        self.live_turns = 0
        self.answered: dict[str, Any] | None = None
        self._cassette: Cassette | None = None

    @classmethod
    def from_cassette(cls, cassette: Cassette, toolset: Toolset | None = None) -> Session:
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
                when the cassette records). ``None``: the tools as the run presented them.

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
        if self._toolset is None:  # frozen without a Toolset: the recorded tools
            assert self._frozen is not None
            return list(self._frozen.specs)
        return [tool.spec for tool in self._toolset.exposed()]

    async def call(
        self, name: str, arguments: dict[str, Any], *, model_call_id: str | None = None
    ) -> ToolResult:
        """Call tool ``name`` with the caller's ``arguments``, recorded before it returns.

        ``model_call_id``: the id the agent's model gave this call (the framework adapters
        pass theirs), recorded on ``tool_called`` with the step of the recorded model turn
        that asked for it; an answer may cite the call by it.

        Returns:
            The tool's result; a failure (``invalid_arguments``, ``unrecordable``...) is
            a result, not an exception.

        Raises:
            ReplayRefused: frozen, and this call was not recorded (the message names the
                recorded event index and has a unified diff of recorded vs asked).

        """
        if self._frozen is not None:
            return self._frozen.serve_call(name, arguments)
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
        await self._live.room()  # back-pressure while segments wait to be sealed
        try:
            admission = self._live.admit(name, arguments)
        except ToolCallError as refused:
            return ToolResult(ok=False, failure=refused.failure)
        self.live_calls += 1
        call_id = admission.recorded_id or admission.call_id  # a span names it (telemetry)
        relayed: list[dict[str, Any]] = []  # sampling and elicitation, for the record
        channel = None if self._askers is None else AskingChannel(self._askers, relayed)
        try:
            observed = await observe(
                gated_call(self._gate, tool, arguments),
                relayed,
                call_id=call_id,
                approver=self._approver,
                channel=channel,
                idempotency_key=admission.idempotency_key or None,
            )
        except BaseException:  # cancelled before its answer: never recorded
            self._live.abandon(admission)
            raise
        if model_call_id:  # the recording links it to the turn that asked for it, if any
            observed = replace(observed, origin={"model_call_id": model_call_id})
        try:
            return self._live.record(admission, observed).result
        except ToolCallError as unrecorded:
            return ToolResult(ok=False, failure=unrecorded.failure)

    def known_turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn | None:
        """The recorded turn a model recorder serves instead of asking its model, if any.

        Args:
            source: ``pydantic-ai``, ``openai-agents`` or ``http``.
            key: the asked request's match key (:func:`toolproof.runs.turns.turn_key`).
            asked: the asked request's client, named by a refusal (:data:`Asked`).

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
            return self._cassette.known_turn(source, key)
        if self.frozen:
            return self.serve_turn(source, key, asked=asked)
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

    def serve_turn(self, source: str, key: bytes, *, asked: Asked = None) -> RecordedTurn:
        """Frozen: the recorded turn of ``source`` whose match key is ``key``, in occurrence order.

        Occurrences count in the order the turns were *asked* when recorded (admission
        numbers, ``turn-0000000N``): the k-th identical request asked now gets the k-th's.

        Args:
            source: ``pydantic-ai``, ``openai-agents`` or ``http``.
            key: the asked request's match key (:func:`toolproof.runs.turns.turn_key`).
            asked: the asked request's client (:meth:`known_turn`).

        Raises:
            ReplayRefused: no such turn was recorded, or every recorded one was served
                already (naming the recorded event index of the next unserved turn, with
                a unified diff of its match key and the asked one).
            InputError: the session is live; or, served by a cassette, the cassette
                misses (rule ``cassette miss``, with the nearest recorded request's diff).

        """
        if self._cassette is not None:
            return self._cassette.serve_turn(source, key)
        if self._frozen is None:
            raise InputError(f"a live session serves no recorded {source} turn", rule="live")
        return self._frozen.serve_turn(source, key, open_schemas=self._toolset is None, asked=asked)

    def pydantic_ai_model(self, model: Any) -> Any:
        """``model`` (a pydantic-ai ``Model`` or model name) wrapped so each turn is recorded.

        Live, each ``request`` is passed to ``model`` and its request and response are
        recorded as a model turn (pydantic-ai's own objects as canonical JSON); frozen,
        the response is served from the recording and ``model`` is never asked.
        Streaming requests are refused (:mod:`toolproof.adapters.frameworks.pydantic_ai_model`).

        Raises:
            InputError: pydantic-ai is not installed (the ``pydantic-ai`` extra).

        """
        try:
            from toolproof.adapters.frameworks.pydantic_ai_model import RecordedModel
        except ImportError as exc:
            raise _needs_extra("pydantic_ai_model", "pydantic-ai", "pydantic-ai", exc) from exc
        return RecordedModel(model, self)

    def openai_agents_model(self, model: Any) -> Any:
        """``model`` (an OpenAI Agents SDK ``Model``) wrapped so each turn is recorded.

        Raises:
            InputError: the SDK is not installed (the ``openai-agents`` extra).

        """
        try:
            from toolproof.adapters.frameworks.openai_agents_model import RecordedAgentsModel
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
        from toolproof.adapters.frameworks.httpx_transport import RecordingTransport

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
            return self._frozen.serve_read(request)
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
            return self._frozen.serve_read(request)
        assert self._live is not None and self._toolset is not None
        entry = self._toolset.catalog.prompts.get(name)
        if entry is None:
            raise InputError(f"prompt {name!r}: no such prompt", prompt=name)
        result = await entry.answer(arguments or None)
        self._live.record_prompt(name, dict(arguments or {}), result)
        return result

    def answer(self, text: str, citations: list[dict[str, Any]] | None = None) -> None:
        """Give the agent's final answer; its quotes become the run's claim.

        The claim is checked at the session's grounding level (``record_session(...,
        grounding=)``, else the ``toolproof.toml``'s ``[grounding]``, else ``details``:
        docs/grounding.md).

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
        if self._live is not None:  # the run's spec keeps the grounding it is checked at
            data = canonical_json({**self.answered, "grounding": self._grounding.to_params()})
            (self._live.directory / ANSWER_FILE).write_bytes(data)

    def langchain_tools(self) -> list[Any]:
        """The session's tools as coroutine-only LangChain ``StructuredTool`` s (needs langchain).

        Each keeps the tool's exact declared schema and hands the caller's arguments
        unchanged to :meth:`call` (recorded, or served frozen); a failure raises
        ``ToolException`` (:mod:`toolproof.adapters.frameworks.langchain`).

        Raises:
            InputError: langchain-core is not installed, or a frozen replay of a run that
                stores no tool definitions (recorded before runs did) was started
                without ``toolset=`` (the tools' schemas are needed).

        """
        if self._toolset is None and self._frozen is not None and self._frozen.presented is None:
            raise InputError(
                "session.langchain_tools() in a frozen replay of a run that stores no tool "
                "definitions (recorded before runs did) needs the Toolset: pass "
                "replay_session(..., toolset=...) or toolproof replay --config toolproof.toml",
                rule="toolset",
            )
        try:
            from toolproof.adapters.frameworks.langchain import session_structured_tools
        except ImportError as exc:
            raise _needs_extra("langchain_tools", "langchain", "langchain", exc) from exc
        return session_structured_tools(self)

    def openai_agents_tools(self) -> list[Any]:
        """The session's tools as OpenAI Agents SDK ``FunctionTool`` s (needs ``openai-agents``).

        Raises:
            InputError: the SDK is not installed (the ``openai-agents`` extra).

        """
        try:
            from toolproof.adapters.frameworks.openai_agents_tools import session_function_tools
        except ImportError as exc:
            raise _needs_extra(
                "openai_agents_tools", "the OpenAI Agents SDK", "openai-agents", exc
            ) from exc
        return session_function_tools(self)

    def pydantic_ai_toolset(self) -> Any:
        """The session's tools as a pydantic-ai ``AbstractToolset`` (needs ``pydantic-ai``).

        Raises:
            InputError: pydantic-ai is not installed (the ``pydantic-ai`` extra).

        """
        try:
            from toolproof.adapters.frameworks.pydantic_ai_toolset import SessionToolset
        except ImportError as exc:
            raise _needs_extra("pydantic_ai_toolset", "pydantic-ai", "pydantic-ai", exc) from exc
        return SessionToolset(self)
