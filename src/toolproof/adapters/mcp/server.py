"""Serve a sealed :class:`~toolproof.tools.toolset.Toolset` as an MCP server.

Every exposed tool and variant of the Toolset (:meth:`Toolset.exposed
<toolproof.tools.toolset.Toolset.exposed>`: the ungated siblings of an ``approve``-gated
variant are hidden unless ``[serve] expose`` names them) is listed (``tools/list``) with
its input schema, its annotations and, when the tool declares or inherits one, its
output schema. ``tools/call`` goes through exactly the path of an in-process call,
``await toolset[name].call(arguments)``: validation, extensions and backends apply; a
hidden tool is answered exactly like one that does not exist.

The wire form of listings and results (content blocks, output schemas, failures)
is :mod:`toolproof.adapters.mcp.content`. An unknown tool name is a JSON-RPC error
(``-32602``, from :func:`toolproof.errors.error_mapping`) naming the tool.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any, Protocol

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from toolproof.adapters.http.asgi import serve_asgi
from toolproof.adapters.http.rebinding import HostGuard, loopback_names
from toolproof.adapters.http.tokens import CLIENT_STATE, BearerGuard, ClientBearerGuard
from toolproof.adapters.mcp.content import (
    FAILURE_META_KEY,
    WRAP_KEY,
    McpAnswer,
    mcp_output_schema,
    mcp_result,
    mcp_tool,
)
from toolproof.adapters.mcp.handlers import catalog_handlers
from toolproof.adapters.mcp.relay import ClientNotices, LogLevels, RequestChannel
from toolproof.adapters.mcp.rounds import ROUND_TTL_SECONDS, Rounds, asks_in_rounds
from toolproof.adapters.mcp.spans import install_server_spans
from toolproof.adapters.mcp.stdio import StdioWire, serve_stdio
from toolproof.adapters.mcp.tasks import Tasks, on_task_backend, until_stopped
from toolproof.adapters.server_paths import hide_server_paths
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.tools import ToolFailure, ToolResult
from toolproof.errors import (
    ReplayRefused,
    ToolCallError,
    ToolNameError,
    ToolproofError,
    error_mapping,
)
from toolproof.runs.live import Admission
from toolproof.runs.segments import SegmentedRecording
from toolproof.sessions.resuming import Resumption
from toolproof.tools.observe import Observed, observe
from toolproof.tools.policy import DEFAULT_PRINCIPAL, PolicyGate, gated_call
from toolproof.tools.tool import Tool
from toolproof.tools.toolset import Toolset
from toolproof.version import __version__

__all__ = [
    "FAILURE_META_KEY",
    "WRAP_KEY",
    "CallObserver",
    "McpAnswer",
    "RecordingObserver",
    "StdioWire",
    "build_server",
    "client_principal",
    "mcp_error",
    "mcp_output_schema",
    "mcp_result",
    "mcp_tool",
    "serve_http",
    "serve_stdio",
]


class CallObserver(Protocol):
    """What a served call reports to (a recorded session); all but ``room`` are synchronous.

    ``call_started`` runs after the tool is found and before it is called, and returns
    a token handed back to ``call_finished``; it may raise :class:`ToolCallError` to
    refuse the call (the client gets that failure, the tool is not called). A call
    cancelled in between reaches ``call_abandoned`` instead of ``call_finished``, which
    may raise :class:`ToolCallError` too (the call ran but cannot be recorded): the
    client gets that failure instead of the result. An observer may also have
    ``served(tool, arguments) -> ToolResult | None``, asked first: a result it gives is
    answered instead of calling the tool (a resumed session's record,
    :meth:`RecordingObserver.served`).
    """

    def call_started(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """Note a call of ``tool`` with ``arguments`` (the caller's object); return a token."""
        ...

    def call_abandoned(self, token: Any) -> None:
        """Note that the call of ``token`` was cancelled before its answer: no outcome comes."""
        ...

    async def room(self) -> None:
        """Wait until a call may be started (back-pressure), before ``call_started``."""
        ...

    def call_finished(self, token: Any, observed: Observed, reply: bytes) -> None:
        """Note the outcome: the result and exact bytes answered, and what the layers reported.

        Args:
            token: what ``call_started`` returned.
            observed: the outcome answered (:attr:`Observed.result`) with what the tool's
                layers reported during the call (:func:`toolproof.tools.observe.observe`):
                the failures besides the answered one and which layer recovered from
                which, approval events, the requests relayed to the client.
            reply: the answer's result bytes (:attr:`McpAnswer.data`).

        """
        ...


class RecordingObserver:
    """The :class:`CallObserver` of ``serve --record``: every served call into a live recording.

    Args:
        recording: the live recording, sealed into segments
            (:class:`~toolproof.runs.segments.SegmentedRecording`).
        resumption: a resumed session's record, answered first (``serve --record ROOT
            --session-id NAME --resume``; :mod:`toolproof.sessions.resuming`).

    """

    def __init__(self, recording: SegmentedRecording, resumption: Resumption | None = None) -> None:
        self.recording = recording
        self.resumption = resumption

    def served(self, tool: Tool, arguments: Any) -> ToolResult | None:
        """A resumed session's answer that is not a live call, or ``None`` (call the tool).

        Returns:
            While the record holds unserved steps, the recorded result of this call (no
            tool runs); a cut call of a tool that must act once, its recorded
            ``outcome_unknown``; a call that is not the next one the record holds, the
            failure ``unrecorded`` naming the recorded event it expected (with a diff),
            neither run nor recorded. ``None``: not resumed, or the record was all served.

        """
        if self.resumption is None:
            return None
        try:
            return self.resumption.call(tool.name, arguments)
        except ReplayRefused as refused:  # the client diverged from the record
            return ToolResult.fail("unrecorded", refused.message, where="runtime")

    def call_started(self, tool: Tool, arguments: dict[str, Any]) -> Admission:
        """Admit the call for recording before the tool runs.

        Raises:
            ToolCallError: it cannot be recorded (see :meth:`LiveRecording.admit`).

        """
        return self.recording.admit(tool.name, arguments)

    async def room(self) -> None:
        """Wait while the recording's full segments wait to be sealed (back-pressure)."""
        await self.recording.room()

    def call_abandoned(self, token: Admission) -> None:
        """Forget a call cancelled before its answer (its segment may be sealed without it)."""
        self.recording.abandon(token)

    def call_finished(self, token: Admission, observed: Observed, reply: bytes) -> None:
        """Record the call's block before it is answered.

        Raises:
            ToolCallError: the block cannot be written (see :meth:`LiveRecording.record`).

        """
        self.recording.record(token, observed)

    def read_finished(self, uri: str, result: dict[str, Any]) -> None:
        """Record an answered ``resources/read`` before it is answered.

        Raises:
            ToolCallError: it cannot be recorded (:meth:`LiveRecording.record_read`).

        """
        self.recording.record_read(uri, result)

    def prompt_finished(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """Record an answered ``prompts/get`` before it is answered.

        Raises:
            ToolCallError: it cannot be recorded (:meth:`LiveRecording.record_prompt`).

        """
        self.recording.record_prompt(name, arguments, result)


def _failed(failure: ToolFailure) -> ToolResult:
    return ToolResult.model_construct(
        schema_version=SCHEMA_VERSION, ok=False, value=None, failure=failure
    )


def mcp_error(error: ToolproofError) -> MCPError:
    """The JSON-RPC error of a toolproof error: its table's code, message and fields.

    Returns:
        ``MCPError(code, message, data={"error": <stable code>, "fields": {...}})``, the
        numbers and code from :func:`toolproof.errors.error_mapping`; message and
        fields name no absolute server path (:mod:`toolproof.adapters.server_paths`).
    """
    mapping = error_mapping(error)
    fields = {key: hide_server_paths(str(value)) for key, value in error.fields.items()}
    message = hide_server_paths(error.message)
    return MCPError(mapping.mcp_code, message, {"error": mapping.code, "fields": fields})


def _unknown_tool(toolset: Toolset, name: str) -> MCPError:
    known = [tool.name for tool in toolset.exposed()]
    shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
    return mcp_error(
        ToolNameError(name, f"no such tool in this toolset (known: {shown or 'none'})")
    )


def client_principal(ctx: Any) -> str | None:
    """Who a served request acts for: ``Agent::<name>`` of its named client token, or ``None``.

    The name is the one :class:`~toolproof.adapters.http.tokens.ClientBearerGuard` left
    in the HTTP request's state (``serve --http --clients FILE``); a request over
    stdio, or one served with a single token or none, names no client.
    """
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    name = state.get(CLIENT_STATE) if isinstance(state, dict) else None
    return f"Agent::{name}" if isinstance(name, str) and name else None


def build_server(
    toolset: Toolset,
    *,
    observer: CallObserver | None = None,
    name: str = "toolproof",
    instructions: str | None = None,
    tasks: Callable[[Tool], bool] = on_task_backend,
) -> Server[Any]:
    """Build the low-level MCP ``Server`` that lists and calls every exposed tool of ``toolset``.

    Args:
        toolset: a sealed Toolset; the server never adds to it nor closes it, and
            serves only its :meth:`~toolproof.tools.toolset.Toolset.exposed` tools.
        observer: told about every call that reaches a tool (see :class:`CallObserver`).
        name: the server name announced in ``serverInfo``.
        instructions: optional instructions announced to clients.
        tasks: which tools a 2026-07-28 client that lists the
            ``io.modelcontextprotocol/tasks`` extension gets as a task
            (:mod:`toolproof.adapters.mcp.tasks`); by default those on the ``process``
            or ``celery`` backend. With none, the extension is not announced.

    Returns:
        An ``mcp.server.lowlevel.Server``; run it with :func:`serve_stdio` or
        :func:`serve_http`.

    """
    served = {tool.name: tool for tool in toolset.exposed()}
    policy = toolset.policy  # [policy]: counters per principal (each named client its own)
    gate = None if policy is None else PolicyGate(policy, DEFAULT_PRINCIPAL)
    listing = types.ListToolsResult(tools=[mcp_tool(tool) for tool in served.values()])
    schemas = {name: tool.spec.input_schema for name, tool in served.items()}

    # the sources' resource updates and list changes, relayed (2026-07-28: subscriptions/listen)
    bus = InMemorySubscriptionBus()
    notices = ClientNotices(bus)
    toolset.catalog.listeners.append(notices.relay)

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        notices.seen(ctx.session)
        return listing

    levels = LogLevels()

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.set(ctx.session, params.level)
        return types.EmptyResult()

    rounds = Rounds()  # 2026-07-28: calls waiting at a question for the client's retry

    async def answer_call(
        tool: Tool,
        arguments: Any,
        principal: str | None,
        channel: RequestChannel,
        relayed: list[dict[str, Any]],
        stop: asyncio.Event | None = None,
    ) -> types.CallToolResult:
        def called() -> Any:  # a task's call ends early once its stop is set (tasks/cancel)
            return until_stopped(gated_call(gate, tool, arguments, principal), stop, tool.name)

        if observer is None:
            observed = await observe(called(), channel=channel)
            return mcp_result(tool, observed.result).reply
        served = getattr(observer, "served", None)  # a resumed session's record first
        answered = served(tool, arguments) if served is not None else None
        if answered is not None:
            return mcp_result(tool, answered).reply
        await observer.room()
        try:
            token = observer.call_started(tool, arguments)
        except ToolCallError as refused:
            return mcp_result(tool, _failed(refused.failure)).reply
        call_id = getattr(token, "call_id", None)  # a recorded call's id: approve layers, span
        key = getattr(token, "idempotency_key", None) or None  # what the body reads
        try:
            observed = await observe(
                called(),
                relayed,  # sampling and elicitation, for the record
                call_id=call_id,
                channel=channel,
                idempotency_key=key,
            )
        except BaseException:  # cancelled before its answer: never recorded
            observer.call_abandoned(token)
            raise
        answer = mcp_result(tool, observed.result)  # answered and recorded as the client sees it
        try:
            observer.call_finished(token, replace(observed, result=answer.result), answer.data)
        except ToolCallError as unrecorded:
            return mcp_result(tool, _failed(unrecorded.failure)).reply
        return answer.reply

    task_store = Tasks(client_principal, served.values(), tasks)

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = served.get(params.name)
        if tool is None:
            raise _unknown_tool(toolset, params.name)
        arguments: Any = params.arguments if params.arguments is not None else {}
        principal = client_principal(ctx)  # the named client token's, else the gate's

        async def run(
            channel: RequestChannel, relayed: list[dict[str, Any]]
        ) -> types.CallToolResult:
            return await answer_call(tool, arguments, principal, channel, relayed)

        if asks_in_rounds(ctx):  # 2026-07-28: questions are InputRequiredResults
            return await rounds.call(ctx, params, levels, run)
        relayed: list[dict[str, Any]] = []
        return await run(RequestChannel(ctx, levels, relayed), relayed)

    def start_task(
        ctx: Any,
        params: types.CallToolRequestParams,
        channel: RequestChannel,
        relayed: list[dict[str, Any]],
        stop: asyncio.Event,
    ) -> Coroutine[Any, Any, types.CallToolResult]:
        tool, arguments = served[params.name], params.arguments or {}
        return answer_call(tool, arguments, client_principal(ctx), channel, relayed, stop)

    with warnings.catch_warnings():  # logging/setLevel: deprecated by 2026-07-28 (SEP-2577)
        warnings.simplefilter("ignore")
        server: Server[Any] = Server(
            name,
            version=__version__,
            instructions=instructions,
            get_tool_input_schema=schemas.get,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_set_logging_level=set_level,
            on_subscriptions_listen=ListenHandler(bus),
            **catalog_handlers(toolset.catalog, observer, notices, levels, rounds),
        )
    # the requestState of input-required rounds: sealed, bound to the request (SEP-2322)
    security = RequestStateSecurity.ephemeral(ttl=ROUND_TTL_SECONDS)
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    task_store.install(server, call_tool, start_task)  # tasks/get, tasks/update, tasks/cancel
    install_server_spans(server)  # SERVER spans continuing the caller's trace (telemetry on)
    return server


async def serve_http(
    server: Server[Any],
    host: str,
    port: int,
    stop: asyncio.Event,
    *,
    token: str | None = None,
    clients: Mapping[str, str] | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``server`` over MCP streamable HTTP at ``http://HOST:PORT/mcp`` until ``stop`` is set.

    On a loopback host (``127.0.0.0/8``, ``::1`` in any spelling, ``localhost``) only
    requests whose ``Host`` and ``Origin`` name the bound address and port are served
    (:class:`~toolproof.adapters.http.rebinding.HostGuard`, the guard ``serve-api`` uses: 421
    or 403 otherwise); the SDK's own, narrower check is off. With ``token``, every
    request must carry ``Authorization: Bearer <token>`` (401 otherwise). With
    ``clients`` (``{name: token}``, instead of ``token``), every request must carry one
    of them, and its calls are decided by ``[policy]`` for ``Agent::<name>``
    (:func:`client_principal`). In-flight requests finish before it returns; ``ready``
    is called once the socket listens.

    Raises:
        ValueError: both ``token`` and ``clients`` are given.

    """
    if token is not None and clients:
        raise ValueError("serve_http takes token or clients, not both")
    app: Any = server.streamable_http_app(
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    if token is not None:
        app = BearerGuard(app, token)
    elif clients:
        app = ClientBearerGuard(app, clients)
    names = loopback_names(host, port)
    if names is not None:
        app = HostGuard(app, names)
    await serve_asgi(app, host, port, stop, ready=ready)
