"""``[approvals]``: what needs a person, where requests wait, and for how long.

::

    [approvals]
    store = "approvals.sqlite"       # relative to toolproof.toml
    timeout_seconds = 600            # no decision in time: denied (fail closed)
    mode = "wait"                    # or "defer": return approval_pending with a handle

    [[approvals.rules]]              # optional; without rules every call is gated
    when = { destructiveHint = true }   # MCP annotations of the tool, all must equal
    arguments = { "/force" = true }     # JSON Pointers (RFC 6901) into the arguments

A rule matches a call when every ``when`` hint equals the tool's annotation (as
stated; an unstated hint never matches) and every ``arguments`` pointer resolves to
a value equal to the given one (JSON equality: ``1`` is not ``true``) in the
arguments the body will run with: a member the call omits, at any depth, is read as
the input schema's ``default`` there (an omitted object without one as ``{}``, so its
members' defaults apply). The first matching rule gates the call; when none matches
the call runs ungated.

A rule of the ``[approvals]`` table is global: it is the policy of every ``approve``
layer that gives none of its own. Such a rule whose ``when`` holds for a gated tool
must point into that tool's input schema (:func:`undeclared_pointers`); one that
points at a member the schema does not declare could never gate the tool, so the
load is refused (``ConfigError`` naming the rule and the tool).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from toolproof.contract.approval_rules import (
    CompiledRule,
    json_equal,
    resolve_pointer,
    rule_defaults,
)
from toolproof.contract.bounds import Seconds
from toolproof.contract.schema_paths import undeclared_part
from toolproof.contract.tools import ToolAnnotations

__all__ = [
    "ANNOTATION_KEYS",
    "DEFAULT_STORE",
    "ApprovalPolicy",
    "ApprovalRule",
    "CompiledRule",
    "compile_rules",
    "json_equal",
    "resolve_pointer",
    "undeclared_pointers",
]

DEFAULT_STORE = "approvals.sqlite"
"""The store file when ``[approvals] store`` is not given (beside the toml)."""

ANNOTATION_KEYS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title")
"""The MCP tool annotations a rule's ``when`` may name."""


class ApprovalRule(BaseModel):
    """One ``[[approvals.rules]]`` entry; see the module docstring.

    Attributes:
        when: MCP annotation name -> the value it must have.
        arguments: JSON Pointer -> the JSON value found there.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    when: dict[str, JsonValue] = Field(default_factory=dict)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("when")
    @classmethod
    def _annotations(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for key in value:
            if key not in ANNOTATION_KEYS:
                raise ValueError(
                    f"{key!r} is not an MCP tool annotation (known: {', '.join(ANNOTATION_KEYS)})"
                )
        return value

    @field_validator("arguments")
    @classmethod
    def _pointers(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for pointer in value:
            if not pointer.startswith("/"):
                raise ValueError(f"{pointer!r} is not a JSON Pointer (RFC 6901: starts with '/')")
        return value


class ApprovalPolicy(BaseModel):
    """The ``[approvals]`` table (also the ``approve`` extension's config).

    Attributes:
        store: the SQLite file of requests and decisions, relative to the config file.
        timeout_seconds: seconds a request waits for a decision; then it is denied.
        mode: ``wait`` (the call waits for the decision) or ``defer`` (the call fails at
            once with kind ``approval_pending`` and a handle to retry with).
        rules: what needs a person; empty: every call of a gated tool.

    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = DEFAULT_STORE
    timeout_seconds: Seconds = 600.0
    mode: Literal["wait", "defer"] = "wait"
    rules: tuple[ApprovalRule, ...] = ()


def _when_holds(when: Mapping[str, Any], annotations: ToolAnnotations) -> bool:
    for key, expected in when.items():
        stated = getattr(annotations, key)
        if stated is None or not json_equal(stated, expected):
            return False
    return True


def compile_rules(
    policy: ApprovalPolicy,
    annotations: ToolAnnotations,
    input_schema: Mapping[str, Any] | None = None,
) -> tuple[CompiledRule, ...] | None:
    """The rules that can gate a tool with ``annotations``, in order.

    Args:
        policy: the ``[approvals]`` table.
        annotations: the tool's MCP annotations (``when``).
        input_schema: the tool's input schema: a member a predicate points into that
            the call omits (at any depth) is evaluated as its ``default`` (what the
            body runs with); the rule records them as ``defaults`` (pointer prefix ->
            value).

    Returns:
        ``None`` when the policy has no rules (every call is gated); else the rules whose
        ``when`` holds (an empty tuple: no call of this tool is gated).

    """
    if not policy.rules:
        return None
    out = []
    for index, rule in enumerate(policy.rules):
        if _when_holds(rule.when, annotations):
            record: dict[str, Any] = {"index": index, **rule.model_dump(mode="json")}
            defaults = rule_defaults(rule.arguments, input_schema or {})
            if defaults:
                record["defaults"] = defaults
            out.append(CompiledRule(index, tuple(rule.arguments.items()), record, defaults))
    return tuple(out)


def undeclared_pointers(
    policy: ApprovalPolicy, annotations: ToolAnnotations, input_schema: Mapping[str, Any]
) -> list[tuple[int, str, str]]:
    """The rules that could gate a tool but point where its input schema declares nothing.

    Args:
        policy: the ``[approvals]`` table.
        annotations: the tool's MCP annotations (a rule whose ``when`` does not hold
            cannot gate the tool and is not checked).
        input_schema: the tool's input schema.

    Returns:
        ``(rule index, pointer, token)`` for each such predicate, in order: ``token``
        is the first member the schema declares others beside but not it
        (:func:`~toolproof.contract.schema_paths.undeclared_part`).

    """
    out = []
    for index, rule in enumerate(policy.rules):
        if not _when_holds(rule.when, annotations):
            continue
        for pointer in rule.arguments:
            token = undeclared_part(pointer, input_schema)
            if token is not None:
                out.append((index, pointer, token))
    return out
