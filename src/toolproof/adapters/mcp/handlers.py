"""The MCP handlers of a Toolset's resources, resource templates, prompts and completions.

:func:`catalog_handlers` returns the ``on_*`` handlers of the low-level SDK ``Server``
for ``toolset.catalog`` (:mod:`toolproof.tools.catalog`): ``resources/list``,
``resources/templates/list``, ``resources/read`` (text and binary contents as the
source answered them), ``resources/subscribe`` and ``resources/unsubscribe``
(forwarded to the source that lists the URI), ``prompts/list``, ``prompts/get`` and
``completion/complete`` (routed by the reference's prompt name or URI template; a
reference nobody answers completes to no values). An unknown URI or prompt is a
JSON-RPC error ``-32602`` naming it; a source that fails answers ``-32603`` with
its message. With an empty catalog no handler is installed (the capabilities are not
announced).

A read or prompt get is answered with the client as its call channel, so an imported
server that asks during it is relayed like a tool call's question: on 2025-11-25 as a
request to the client, on 2026-07-28 as input-required rounds
(:mod:`toolproof.adapters.mcp.rounds`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolproof.adapters.mcp.relay import ClientNotices, LogLevels, RequestChannel
from toolproof.adapters.mcp.rounds import Rounds, asks_in_rounds
from toolproof.adapters.server_paths import hide_server_paths
from toolproof.contract.base import SCHEMA_VERSION
from toolproof.contract.tools import ToolResult
from toolproof.errors import ToolCallError
from toolproof.sources.mcp.common import McpCallError
from toolproof.tools.catalog import Catalog, Entry
from toolproof.tools.observe import observe

T = TypeVar("T")

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "CatalogObserver", "catalog_handlers"]

INVALID_PARAMS = -32602
"""JSON-RPC: an unknown resource URI or prompt name."""
INTERNAL_ERROR = -32603
"""JSON-RPC: the resource's or prompt's source failed."""


async def _answer(what: str, send: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    try:
        return await send
    except McpCallError as exc:
        raise MCPError(INTERNAL_ERROR, hide_server_paths(f"{what}: {exc}")) from exc


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def _resource(catalog: Catalog, uri: str) -> Entry:
    entry = catalog.resource_for(uri)
    if entry is None:
        raise MCPError(INVALID_PARAMS, f"resource {uri!r}: no resource or template lists it")
    return entry


def _completion(catalog: Catalog) -> Callable[..., Awaitable[types.CompleteResult]]:
    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref.model_dump(by_alias=True, mode="json", exclude_none=True)
        if ref.get("type") == "ref/prompt":
            entry = catalog.prompts.get(str(ref.get("name")))
        else:
            entry = catalog.templates.get(str(ref.get("uri")))
        if entry is None or entry.complete is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        argument = params.argument.model_dump(by_alias=True, mode="json")
        context = params.context.model_dump(by_alias=True, mode="json") if params.context else None
        answer = await _answer("completion", entry.complete(ref, argument, context))
        return types.CompleteResult.model_validate(answer)

    return complete


class CatalogObserver(Protocol):
    """Told about every answered read and prompt get before it is answered (``--record``).

    Either method may raise :class:`~toolproof.errors.ToolCallError` (it cannot be
    recorded): the client then gets a JSON-RPC error ``-32603`` with its message.
    """

    def read_finished(self, uri: str, result: dict[str, Any]) -> None:
        """Note that ``uri`` was read and answered ``result`` (wire form)."""
        ...

    def prompt_finished(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """Note that prompt ``name`` was got with ``arguments`` and answered ``result``."""
        ...


def _noted(note: Callable[[], None]) -> None:
    try:
        note()
    except ToolCallError as exc:
        raise MCPError(INTERNAL_ERROR, hide_server_paths(exc.failure.message)) from exc


def catalog_handlers(
    catalog: Catalog,
    observer: Any = None,
    notices: ClientNotices | None = None,
    levels: LogLevels | None = None,
    rounds: Rounds | None = None,
) -> dict[str, Any]:
    """The ``Server(on_...=)`` keyword arguments serving ``catalog`` (none when it is empty).

    Args:
        catalog: the Toolset's resources, templates and prompts.
        observer: a :class:`CatalogObserver` told about every answered read and prompt
            get (``serve --record``); one without those methods is not told.
        notices: told which connection listed and subscribed to what, to relay the
            sources' change notifications (:class:`~toolproof.adapters.mcp.relay.
            ClientNotices`).
        levels: the sessions' log levels (for the channel of a read or prompt get).
        rounds: the server's input-required rounds (2026-07-28 clients); ``None``: a
            question during a read or prompt get is asked as a request.

    """
    if not catalog:
        return {}
    relay = notices or ClientNotices()
    note_read = getattr(observer, "read_finished", None)
    note_prompt = getattr(observer, "prompt_finished", None)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        relay.seen(ctx.session)
        listed = [entry.listing for entry in catalog.resources.values()]
        return types.ListResourcesResult.model_validate({"resources": listed})

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        relay.seen(ctx.session)
        listed = [entry.listing for entry in catalog.templates.values()]
        return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": listed})

    log_levels = levels or LogLevels()

    async def read(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        entry = _resource(catalog, uri)

        async def answer() -> types.ReadResourceResult:
            return await _read(entry, uri, note_read)

        return await _asking(ctx, params, answer, log_levels, rounds)

    async def subscription(ctx: Any, params: Any, on: bool) -> types.EmptyResult:
        uri = str(params.uri)
        entry = _resource(catalog, uri)
        relay.subscribe(ctx.session, uri, on)  # before the source may send an update
        if entry.subscribe is not None:
            try:
                await entry.subscribe(uri, on)
            except McpCallError as exc:
                message = hide_server_paths(f"resource {uri!r}: {exc}")
                raise MCPError(INTERNAL_ERROR, message) from exc
        return types.EmptyResult()

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        return await subscription(ctx, params, True)

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return await subscription(ctx, params, False)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        relay.seen(ctx.session)
        listed = [entry.listing for entry in catalog.prompts.values()]
        return types.ListPromptsResult.model_validate({"prompts": listed})

    async def get_prompt(
        ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        entry = catalog.prompts.get(params.name)
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"prompt {params.name!r}: no such prompt")

        async def answer() -> types.GetPromptResult:
            return await _prompt(entry, params, note_prompt)

        return await _asking(ctx, params, answer, log_levels, rounds)

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read,
        "on_subscribe_resource": subscribe,
        "on_unsubscribe_resource": unsubscribe,
        "on_list_prompts": list_prompts,
        "on_get_prompt": get_prompt,
        "on_completion": _completion(catalog),
    }


async def _read(entry: Entry, uri: str, note: Any) -> types.ReadResourceResult:
    answer = await _answer(f"resource {uri!r}", entry.answer(uri))
    result = types.ReadResourceResult.model_validate(answer)
    if note is not None:
        _noted(lambda: note(uri, _wire(result)))
    return result


async def _prompt(
    entry: Entry, params: types.GetPromptRequestParams, note: Any
) -> types.GetPromptResult:
    answer = await _answer(f"prompt {params.name!r}", entry.answer(params.arguments))
    result = types.GetPromptResult.model_validate(answer)
    if note is not None:
        arguments = dict(params.arguments or {})
        _noted(lambda: note(params.name, arguments, _wire(result)))
    return result


async def _asking(
    ctx: Any,
    params: types.InputResponseRequestParams,
    answer: Callable[[], Awaitable[T]],
    levels: LogLevels,
    rounds: Rounds | None,
) -> T | types.InputRequiredResult:
    """Answer with the client as call channel; over 2026-07-28 in input-required rounds."""

    async def run(channel: RequestChannel, relayed: list[dict[str, Any]]) -> T:
        return await _in_scope(answer(), channel)

    if rounds is not None and asks_in_rounds(ctx):
        return await rounds.call(ctx, params, levels, run)
    return await run(RequestChannel(ctx, levels), [])


async def _in_scope(answer: Awaitable[T], channel: RequestChannel) -> T:
    """Await ``answer`` with ``channel`` as its call channel (a relayed question's way)."""
    box: list[T] = []

    async def call() -> ToolResult:
        box.append(await answer)
        return ToolResult.model_construct(
            schema_version=SCHEMA_VERSION, ok=True, value=None, failure=None
        )

    await observe(call(), channel=channel)
    return box[0]
