"""MCP resources and prompts from Python functions: ``@toolproof.resource``, ``@toolproof.prompt``.

A ``[[python]]`` module's marked functions join ``toolset.catalog``
(:mod:`toolproof.tools.catalog`) beside its tools:

* ``@toolproof.resource("test://static-text", mime_type="text/plain")`` on a function
  returning ``str`` (a text resource), ``bytes`` (a binary one, sent base64) or an
  :class:`~toolproof.tools.content.EmbeddedResource`. A URI with ``{name}`` parts is a
  resource template; the function takes those names as string parameters.
* ``@toolproof.prompt`` on a function whose parameters are the prompt's arguments
  (strings; those without a default are required) returning a string or a list of
  strings, :class:`~toolproof.tools.content.Image`, ``Audio`` and ``EmbeddedResource``
  items: each item is one ``user`` message.

A parameter annotated :class:`~toolproof.tools.context.Context` is no argument: it gets
the call's context, so a prompt or resource can log or ask the client (over
2026-07-28, an input-required round) as a tool body does. Sync functions run in a
worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from toolproof.tools.catalog import Catalog, Entry, template_match
from toolproof.tools.content import Audio, EmbeddedResource, Image
from toolproof.tools.context import Context

__all__ = ["PROMPT_MARK", "RESOURCE_MARK", "bind_python_catalog", "prompt", "resource"]

RESOURCE_MARK = "__toolproof_resource__"
PROMPT_MARK = "__toolproof_prompt__"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class _Resource:
    uri: str
    name: str | None
    description: str | None
    mime_type: str | None


@dataclass(frozen=True)
class _Prompt:
    name: str | None
    description: str | None


def resource(
    uri: str,
    *,
    name: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
) -> Callable[[F], F]:
    """Mark a function as the MCP resource (or template, with ``{name}`` parts) at ``uri``.

    Args:
        uri: the resource's URI, or an RFC 6570 level-1 template.
        name: the listed name (default: the function's name).
        description: the listed description (default: the docstring's first line).
        mime_type: the media type of its contents.

    """

    def mark(fn: F) -> F:
        setattr(fn, RESOURCE_MARK, _Resource(uri, name, description, mime_type))
        return fn

    return mark


def prompt(fn: Any = None, /, *, name: str | None = None, description: str | None = None) -> Any:
    """Mark a function as an MCP prompt (``@toolproof.prompt`` or ``@toolproof.prompt(name=)``)."""

    def mark(func: F) -> F:
        setattr(func, PROMPT_MARK, _Prompt(name, description))
        return func

    return mark(fn) if fn is not None else mark


def _context_params(fn: Callable[..., Any]) -> list[str]:
    """The parameters of ``fn`` annotated :class:`Context` (unresolvable hints: none)."""
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError):
        return []
    return [name for name, hint in hints.items() if hint is Context and name != "return"]


async def _run(fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    arguments = {**arguments, **{name: Context() for name in _context_params(fn)}}
    if inspect.iscoroutinefunction(fn):
        return await fn(**arguments)
    return await asyncio.to_thread(functools.partial(fn, **arguments))


def _summary(fn: Callable[..., Any]) -> str:
    return (inspect.getdoc(fn) or "").split("\n", 1)[0]


def _contents(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    if isinstance(value, EmbeddedResource):
        return value.contents()
    body: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        body["mimeType"] = mime_type
    if isinstance(value, bytes | bytearray):
        body["blob"] = base64.b64encode(bytes(value)).decode("ascii")
    elif isinstance(value, str):
        body["text"] = value
    else:
        raise TypeError(f"resource {uri!r} returned a {type(value).__name__}: str or bytes")
    return body


def _bind_resource(catalog: Catalog, fn: Callable[..., Any], mark: _Resource, owner: str) -> None:
    async def read(uri: str) -> dict[str, Any]:
        variables = template_match(mark.uri, uri) or {}
        return {"contents": [_contents(uri, await _run(fn, variables), mark.mime_type)]}

    listing: dict[str, Any] = {
        "name": mark.name or fn.__name__,
        "description": mark.description or _summary(fn),
    }
    if mark.mime_type is not None:
        listing["mimeType"] = mark.mime_type
    if "{" in mark.uri:
        catalog.add_template(Entry({**listing, "uriTemplate": mark.uri}, read, owner))
    else:
        catalog.add_resource(Entry({**listing, "uri": mark.uri}, read, owner))


def _message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, Image | Audio | EmbeddedResource):
        return {"role": "user", "content": item.block()}
    raise TypeError(f"a prompt message is a {type(item).__name__}: str, Image, Audio or resource")


def _bind_prompt(catalog: Catalog, fn: Callable[..., Any], mark: _Prompt, owner: str) -> None:
    async def get(arguments: dict[str, str] | None) -> dict[str, Any]:
        value = await _run(fn, dict(arguments or {}))
        items = value if isinstance(value, list | tuple) else [value]
        return {"messages": [_message(item) for item in items]}

    contexts = _context_params(fn)
    arguments = [
        {"name": param.name, "required": param.default is param.empty}
        for param in inspect.signature(fn).parameters.values()
        if param.name not in contexts
    ]
    listing: dict[str, Any] = {
        "name": mark.name or fn.__name__,
        "description": mark.description or _summary(fn),
    }
    if arguments:
        listing["arguments"] = arguments
    catalog.add_prompt(Entry(listing, get, owner))


def bind_python_catalog(catalog: Catalog, module: ModuleType, owner: str) -> None:
    """Add the ``@resource`` and ``@prompt`` functions defined in ``module`` to ``catalog``."""
    for value in vars(module).values():
        if not callable(value) or getattr(value, "__module__", None) != module.__name__:
            continue
        marked = getattr(value, RESOURCE_MARK, None)
        if isinstance(marked, _Resource):
            _bind_resource(catalog, value, marked, owner)
        asked = getattr(value, PROMPT_MARK, None)
        if isinstance(asked, _Prompt):
            _bind_prompt(catalog, value, asked, owner)
