"""Declared tools (seed 003): a ``ToolContribution`` bound by its JSON Schema.

A contribution carries a name, a description, a declared ``input_schema`` and an
async ``invoke(arguments)``; :func:`bind_contribution` turns it into a :class:`Tool`
once, at the composition root:

* the schema is checked against :class:`~toolproof.schema.limits.SchemaLimits`
  (size, depth, reference expansion), its ``$ref`` s resolved locally (remote ones
  refused), and deep-copied: the declaration is never mutated;
* it is compiled once by jsonschema-rs (draft 2020-12 unless ``$schema`` says
  otherwise, ``format`` as annotation, no coercion, nothing fetched); a schema
  its metaschema refuses is refused naming the offending field;
* ``invoke`` is captured now and never looked up again; it receives exactly the
  caller's JSON object (nothing injected, renamed, coerced or dropped).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from toolproof.contract.tools import ToolAnnotations, ToolSpec
from toolproof.errors import ToolBindError, ToolNameError, validation_problem
from toolproof.schema.limits import DEFAULT_LIMITS, SchemaLimits, prepare_schema
from toolproof.schema.own_schema import compile_checked
from toolproof.schema.property_names import declarable_field
from toolproof.tools.tool import Body, Tool
from toolproof.tools.toolset import Toolset

__all__ = [
    "ToolContribution",
    "bind_contribution",
    "bind_contributions",
    "declarable_field",
]

Invoke = Callable[[dict[str, Any]], Awaitable[Any]]
"""``async invoke(arguments) -> str | JSON``."""


@dataclass(frozen=True)
class ToolContribution:
    """A tool declared by JSON Schema: what an MCP server or a plugin offers.

    Attributes:
        name: the tool name.
        description: what the tool does.
        input_schema: the JSON Schema of the arguments object (deep-copied at bind time).
        invoke: ``async invoke(arguments: dict) -> str | JSON``; captured at bind time.
        output_schema: the JSON Schema of the result value, or ``None``.
        annotations: MCP tool annotations, when declared.
        version: the tool's version.
        source: where it came from (``mcp:git``, ``plugin:pkg``), for descriptors and errors.
        deterministic: False when identical calls may give different results.
        varies: what varies when not deterministic.
        idempotency: ``"key"`` when ``invoke`` honours the call's idempotency key (acts
            at most once per key: docs/durability.md), else ``None``.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any] | bool
    invoke: Invoke
    output_schema: Mapping[str, Any] | None = None
    annotations: ToolAnnotations | None = None
    version: str = "0"
    source: str = ""
    deterministic: bool = True
    varies: tuple[str, ...] = field(default=())
    idempotency: Literal["key"] | None = None


def _body_for(name: str, invoke: Any) -> Body:
    if not callable(invoke):
        raise ToolBindError(name, "invoke", "must be an async callable: invoke(arguments)")
    if inspect.iscoroutinefunction(invoke):
        body: Body = invoke
        return body

    async def awaiting(arguments: dict[str, Any]) -> Any:
        result = invoke(arguments)
        if not inspect.isawaitable(result):
            raise TypeError(
                f"invoke of tool {name!r} returned {type(result).__name__}, not an awaitable "
                "(rule: invoke is async; there is no synchronous path)"
            )
        return await result

    return awaiting


def bind_contribution(
    contribution: ToolContribution, *, limits: SchemaLimits | None = None
) -> Tool:
    """Bind a :class:`ToolContribution` as a validated :class:`Tool`.

    Args:
        contribution: the declaration.
        limits: bounds on the declared schemas (default
            :data:`~toolproof.schema.limits.DEFAULT_LIMITS`).

    Returns:
        The tool; ``await tool.call(arguments)`` validates ``arguments`` with the
        compiled validator and hands ``invoke`` exactly the caller's object.

    Raises:
        ToolBindError: the declaration cannot be bound faithfully; ``tool`` names
            it, ``field`` the offending field (``input_schema.properties.x.type``),
            ``rule`` the rule or limit it breaks.

    """
    name = contribution.name
    bounds = limits or DEFAULT_LIMITS
    body = _body_for(name, contribution.invoke)
    prepared = prepare_schema(name, "input_schema", contribution.input_schema, bounds)
    validator = compile_checked(name, "input_schema", prepared.schema)
    output: dict[str, Any] | None = None
    output_fanout = 1
    if contribution.output_schema is not None:
        prepared_output = prepare_schema(name, "output_schema", contribution.output_schema, bounds)
        output, output_fanout = prepared_output.schema, prepared_output.fanout
        compile_checked(name, "output_schema", output)
    try:
        spec = ToolSpec(
            name=name,
            version=contribution.version,
            description=contribution.description or "",
            input_schema=prepared.schema,
            output_schema=output,
            annotations=contribution.annotations or ToolAnnotations(),
            idempotency=contribution.idempotency,
        )
    except ValidationError as exc:
        first = validation_problem(exc, empty="declaration")
        raise ToolBindError(str(name), first.where, first.message) from exc
    return Tool(
        spec,
        body,
        source=contribution.source,
        deterministic=contribution.deterministic,
        varies=contribution.varies,
        validator=validator,
        fanout=prepared.fanout,
        output_fanout=output_fanout,
    )


def bind_contributions(
    toolset: Toolset,
    contributions: Iterable[ToolContribution],
    *,
    owner: str,
    limits: SchemaLimits | None = None,
) -> list[Tool]:
    """Bind each contribution into ``toolset``; quarantine each that cannot be bound.

    A refused declaration is recorded with :meth:`Toolset.quarantine` (tool name,
    field, rule, owner) and every other contribution still binds; so is one whose
    binding raises anything else (a plugin's ``Mapping`` that fails when read), with
    field ``declaration`` and the exception's type and message as the rule.

    Args:
        toolset: the unsealed Toolset to add to.
        contributions: the declarations, bound in order.
        owner: who contributed them (``mcp:git``, ``plugin:pkg``), named in errors.
        limits: bounds on the declared schemas (see :func:`bind_contribution`).

    Returns:
        The tools that were added, in order.

    Raises:
        ToolsetSealedError: the Toolset is sealed.

    """
    added: list[Tool] = []
    for contribution in contributions:
        try:
            added.append(toolset.add(bind_contribution(contribution, limits=limits), owner=owner))
        except ToolBindError as exc:
            toolset.quarantine(
                contribution.name, exc.fields["field"], exc.fields["rule"], owner=owner
            )
        except ToolNameError as exc:
            toolset.quarantine(contribution.name, "name", exc.fields["rule"], owner=owner)
        except Exception as exc:  # a declaration that breaks binding itself: isolate it
            rule = f"binding raised {type(exc).__module__}.{type(exc).__qualname__}: {exc}"
            toolset.quarantine(str(contribution.name), "declaration", rule, owner=owner)
    return added
