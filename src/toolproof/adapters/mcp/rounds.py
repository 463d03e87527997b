"""Input-required rounds: a served call's questions on a 2026-07-28 client (SEP-2322).

Protocol 2026-07-28 has no server-initiated requests: a ``tools/call`` whose body asks
(``Context.elicit`` / ``Context.sample``, or an imported server's relayed question)
answers an ``InputRequiredResult`` instead, and the client retries the same request
with its answers (``inputResponses``) and the echoed ``requestState``. The body does
not start again: it **waits** at its question while the client answers, and resumes
with the answer.

:class:`Rounds` holds the suspended calls of one server (in memory: a stdio server or
one HTTP process). Each call runs as its own task with a :class:`RoundsChannel`; a
question parks the body on a future and the request is answered
``InputRequiredResult(inputRequests={"q1": <request>}, requestState=<id>)`` (every
question the body has pending at that moment, keyed ``q1``, ``q2``... per call). The
retry delivers each answer to its question's future (one missing: asked again) and
answers the next question or the call's result. The ``requestState`` is a random id,
sealed and bound to the method, tool and arguments by the SDK's
:class:`~mcp.server.request_state.RequestStateBoundary`; an unknown or finished one is
``-32602 Invalid or expired requestState``. A call not resumed within
:data:`ROUND_TTL_SECONDS` is cancelled (like a call whose client went away).

A client that did not declare the capability a question needs gets the JSON-RPC
error ``-32021`` (missing required client capability) with
``data.requiredCapabilities`` naming it, instead of the call's failure; a body that
catches the refusal (kind ``unavailable``) and answers anyway, asking only what the
client can answer, gets its answer through.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolproof.adapters.mcp.relay import LogLevels, RequestChannel, _failure

__all__ = ["ROUND_TTL_SECONDS", "Rounds", "RoundsChannel", "asks_in_rounds"]

R = TypeVar("R")

ROUND_TTL_SECONDS = 600.0
"""How long a suspended call waits for the client's retry (the SDK's request-state TTL)."""


def asks_in_rounds(ctx: Any) -> bool:
    """Whether the request of ``ctx`` negotiated a revision with input-required results."""
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


@dataclass
class _Question:
    key: str
    method: str
    request: Any  # the embedded InputRequest model
    asked: dict[str, Any]  # its params in wire form (for the record)
    answer: asyncio.Future[dict[str, Any]]


@dataclass
class _Suspended(Generic[R]):
    task: asyncio.Task[R] | None = None
    pending: dict[str, _Question] = field(default_factory=dict)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    count: int = 0
    timer: asyncio.TimerHandle | None = None
    channel: RoundsChannel | None = None


class RoundsChannel(RequestChannel):
    """A :class:`RequestChannel` whose questions wait for the next round instead of a request.

    Log messages and progress go to the request of the current round.
    """

    def __init__(
        self,
        ctx: Any,
        levels: LogLevels,
        relayed: list[dict[str, Any]] | None,
        suspended: _Suspended[Any],
    ) -> None:
        super().__init__(ctx, levels, relayed)
        self._suspended = suspended
        self.missing: types.ClientCapabilities | None = None

    def rebind(self, ctx: Any) -> None:
        """Send log messages and progress to the request ``ctx`` (a retry) from now on."""
        self._ctx = ctx

    def note_missing(self, capabilities: dict[str, Any]) -> None:
        """An imported server's ``-32021``: the call, when it fails, answers ``-32021`` too.

        ``capabilities`` that are not ``ClientCapabilities`` are ignored (the call's
        failure still says what the server answered).
        """
        try:
            self.missing = types.ClientCapabilities.model_validate(capabilities)
        except ValidationError:
            return

    def _capable(self, capability: types.ClientCapabilities, method: str) -> None:
        if not self._ctx.session.check_client_capability(capability):
            self.missing = capability
            raise _failure(
                "unavailable", f"the client did not declare the capability {method} needs"
            )

    async def _ask(
        self, method: str, request: Any, result_type: Any, key: str | None
    ) -> dict[str, Any]:
        params = request.params  # roots/list: none
        asked = (
            {}
            if params is None
            else params.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        suspended = self._suspended
        suspended.count += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if key is None:
            key = f"q{suspended.count}"
        if key in suspended.pending:
            raise _failure("tool_error", f"two questions of this call are pending as {key!r}")
        suspended.pending[key] = _Question(key, method, request, asked, future)
        suspended.asked.set()
        try:
            wire = await future
        finally:
            suspended.pending.pop(key, None)
        try:
            result = result_type.model_validate(wire)
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]["msg"]
            failed = _failure("tool_error", f"the client's {method} answer is malformed: {problem}")
            self._note(method, asked, None, failed)
            raise failed from exc
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        self._note(method, asked, dumped, None)
        return dumped


def _failed(task: asyncio.Task[Any]) -> bool:
    """Whether the finished ``task`` raised or answered a failed call (``isError``)."""
    if task.cancelled() or task.exception() is not None:
        return True
    return getattr(task.result(), "is_error", False) is True


def _expired() -> MCPError:
    return MCPError(
        code=types.INVALID_PARAMS,
        message="Invalid or expired requestState",
        data={"reason": "invalid_request_state"},
    )


class Rounds:
    """The suspended calls of one server, by ``requestState`` id (see the module)."""

    def __init__(self, ttl: float = ROUND_TTL_SECONDS) -> None:
        self._calls: dict[str, _Suspended[Any]] = {}
        self._ttl = ttl

    async def call(
        self,
        ctx: Any,
        params: types.InputResponseRequestParams,
        levels: LogLevels,
        run: Callable[[RequestChannel, list[dict[str, Any]]], Coroutine[Any, Any, R]],
    ) -> R | types.InputRequiredResult:
        """Start or resume the request of ``params`` (``run(channel, relayed)`` answers it).

        ``tools/call``, ``prompts/get`` and ``resources/read`` (their params carry
        ``inputResponses`` and ``requestState``).

        Raises:
            MCPError: ``-32602`` for an unknown or expired ``requestState``; ``-32021``
                when the body asked for a capability the client did not declare.

        """
        if params.request_state is None:
            suspended: _Suspended[R] = _Suspended()
            relayed: list[dict[str, Any]] = []
            channel = RoundsChannel(ctx, levels, relayed, suspended)
            suspended.channel = channel
            suspended.task = asyncio.create_task(run(channel, relayed))
            state = secrets.token_urlsafe(32)
            self._calls[state] = suspended
            return await self._next(state, suspended, channel)
        state = params.request_state
        suspended_or_none = self._calls.get(state)
        if suspended_or_none is None or suspended_or_none.channel is None:
            raise _expired()
        suspended = suspended_or_none
        if suspended.timer is not None:
            suspended.timer.cancel()
        resumed = suspended.channel
        assert resumed is not None
        resumed.rebind(ctx)
        responses = params.input_responses or {}
        for key, question in list(suspended.pending.items()):
            if key in responses and not question.answer.done():
                wire = responses[key].model_dump(by_alias=True, mode="json", exclude_none=True)
                question.answer.set_result(wire)
        suspended.asked.clear()
        await asyncio.sleep(0)  # let the body take its answers before looking again
        return await self._next(state, suspended, resumed)

    async def _next(
        self, state: str, suspended: _Suspended[R], channel: RoundsChannel
    ) -> R | types.InputRequiredResult:
        task = suspended.task
        assert task is not None
        while not suspended.pending or all(q.answer.done() for q in suspended.pending.values()):
            if task.done():
                break
            suspended.asked.clear()
            waiter = asyncio.ensure_future(suspended.asked.wait())
            try:
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                task.cancel()
                self._calls.pop(state, None)
                raise
            finally:
                waiter.cancel()
            for _ in range(3):  # siblings asking at the same moment join this round
                await asyncio.sleep(0)
        if task.done():
            self._calls.pop(state, None)
            # a body that caught the refusal and answered anyway is not the client's fault
            if channel.missing is not None and _failed(task):
                raise MCPError(
                    code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message="the client did not declare the capability this call's question needs",
                    data=types.MissingRequiredClientCapabilityErrorData(
                        required_capabilities=channel.missing
                    ).model_dump(by_alias=True, mode="json", exclude_none=True),
                )
            return task.result()
        suspended.timer = asyncio.get_running_loop().call_later(self._ttl, self._expire, state)
        requests: dict[str, Any] = {
            key: question.request
            for key, question in suspended.pending.items()
            if not question.answer.done()
        }
        return types.InputRequiredResult(input_requests=requests, request_state=state)

    def _expire(self, state: str) -> None:
        suspended = self._calls.pop(state, None)
        if suspended is not None and suspended.task is not None:
            suspended.task.cancel()
