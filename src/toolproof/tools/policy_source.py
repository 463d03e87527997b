"""Where in a policy file Cedar's complaint is: lines for parse and validation errors.

The ``cedarpy`` 4.12 bindings report a parse error (``unexpected token `}```) and a
validation error (``for policy `policy1`, attribute `bogus` on entity type `Tool` not
found``) without a source location. This module finds the line without a policy
language of its own: it splits a file into its policies at each ``;`` outside strings
and comments (Cedar's lexical rules, https://docs.cedarpolicy.com/policies/syntax-grammar.html),
asks Cedar to parse each policy alone and then each prefix of the one that fails, and
takes the line of the first token after which Cedar's complaint is no longer
``unexpected end of input``. Cedar stays the only judge of what is wrong; this only
says where.

:func:`check_attributes` asks Cedar's validator (``cedarpy.validate_policies``) about a
loaded policy set with a schema of the request toolproof builds (:func:`request_schema`),
and refuses a policy that names an attribute the request never has.

:func:`for_tool` is the part of a policy set that can apply to one tool (its
resource scope admits ``Tool::"<name>"``), so a decision costs the policies about
that tool, not the whole set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTEXT_ATTRIBUTES",
    "TOOL_ATTRIBUTES",
    "Statement",
    "attribute_problems",
    "for_tool",
    "parse_problem",
    "request_schema",
    "scope_problems",
    "statements",
    "tool_attributes",
]

TOOL_ATTRIBUTES = ("read_only", "destructive", "source", "server")
"""The attributes of the resource ``Tool::"<name>"``."""

CONTEXT_ATTRIBUTES = ("arguments", "calls", "total_calls", "elapsed_seconds")
"""The attributes of the request's context."""

_TOKEN = re.compile(
    r'\s+|//[^\n]*|"(?:[^"\\]|\\.)*"?|[A-Za-z_][A-Za-z0-9_]*|[0-9]+|::|==|!=|<=|>=|&&|\|\||.',
    re.DOTALL,
)
"""Cedar's tokens (whitespace and ``//`` comments included, to be skipped); a string
runs to its closing quote or the end of the text."""

_EOF = "unexpected end of input"
"""Cedar's complaint about a prefix of a policy that is fine so far."""

_UNKNOWN = re.compile(
    r"attribute `(?P<path>[^`]+)` (?:on entity type `[^`]+`|in context .*) not found"
)
"""Cedar's validator's words for an attribute the schema does not have."""

_ACTION = re.compile(r'unrecognized action `(?:[A-Za-z_:]*::)?Action::"(?P<id>[^"]*)"`')
"""Cedar's validator's words for an action other than ``Action::"call_tool"``."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One policy of a file: its text and where its tokens are.

    Attributes:
        text: the policy's text, from its first token to its ``;`` (or the file's end).
        tokens: ``(start, end)`` offsets of each token within ``text``.
        line: the 1-based line of the file its first token is on.
        lines: the 1-based line of each token.

    """

    text: str
    tokens: tuple[tuple[int, int], ...]
    line: int
    lines: tuple[int, ...]


def statements(text: str) -> list[Statement]:
    """Split a policy file into its policies (Cedar's ``;`` outside strings and comments).

    Returns:
        One :class:`Statement` per policy in file order; a trailing part without ``;``
        is one too (an unfinished policy), and whitespace or comments alone are none.

    """
    out: list[Statement] = []
    start: int | None = None
    tokens: list[tuple[int, int]] = []
    line = 1
    lines: list[int] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if not (token[0].isspace() or token.startswith("//")):
            if start is None:
                start = match.start()
            tokens.append((match.start() - start, match.end() - start))
            lines.append(line)
            if token == ";":
                whole = text[start : match.end()]
                out.append(Statement(whole, tuple(tokens), lines[0], tuple(lines)))
                start, tokens, lines = None, [], []
        line += token.count("\n")
    if start is not None:
        out.append(Statement(text[start:], tuple(tokens), lines[0], tuple(lines)))
    return out


def _complaint(cedar: Any, text: str) -> str | None:
    """Cedar's parse error for ``text``, or ``None`` when it parses."""
    try:
        cedar.PolicySet.from_str(text)
    except ValueError as exc:
        return str(exc)
    return None


def _named(complaint: str) -> str | None:
    """The token Cedar's complaint names: ```}``` in backquotes, or the word after ``: ``."""
    quoted = re.search(r"`([^`]+)`", complaint)
    if quoted is not None:
        return quoted.group(1)
    _, sep, word = complaint.rpartition(": ")
    return word if sep and word and " " not in word else None


def parse_problem(cedar: Any, text: str) -> tuple[int, str] | None:
    """Where and why Cedar cannot parse ``text``, one policy at a time.

    In the first policy Cedar refuses, the line is that of the first token after which
    Cedar's complaint is no longer ``unexpected end of input``, or of the first token
    the complaint names that, with the policy cut after it, gets that complaint (Cedar
    recovers inside braces, so ``{ 1 + }`` is refused only at its ``;``); else of the
    first token the complaint names (``invalid policy condition: wehn``); else (a
    policy that never ends) the line its first token is on.

    Returns:
        ``(line, Cedar's message)`` for the first policy that does not parse, or
        ``None`` when each does (then the whole text's complaint has no line).

    """
    for statement in statements(text):
        complaint = _complaint(cedar, statement.text)
        if complaint is None:
            continue
        named = _named(complaint)
        words = [statement.text[start:end] for start, end in statement.tokens]
        for index, (_, end) in enumerate(statement.tokens[:-1]):
            early = _complaint(cedar, statement.text[:end])
            if early is not None and early != _EOF:
                return statement.lines[index], early
            cut = statement.text[:end] + " ;"
            if words[index] == named and _complaint(cedar, cut) == complaint:
                return statement.lines[index], complaint
        if named in words:
            return statement.lines[words.index(named)], complaint
        return statement.line, complaint
    return None


def _cedar_type(schema: Any) -> dict[str, Any]:
    """The Cedar schema type of a JSON Schema (a guess where Cedar has none: ``String``)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "integer":
        return {"type": "Long"}
    if kind == "boolean":
        return {"type": "Boolean"}
    if kind == "array" and isinstance(schema.get("items"), dict):
        return {"type": "Set", "element": _cedar_type(schema["items"])}
    if kind == "object" or (isinstance(schema, dict) and "properties" in schema):
        return {"type": "Record", "attributes": _record(schema.get("properties"))}
    return {"type": "String"}  # Cedar has no type for the rest; its type errors are not ours


def _record(properties: Any) -> dict[str, Any]:
    """A Cedar record type's attributes for JSON Schema ``properties`` (each optional)."""
    if not isinstance(properties, Mapping):
        return {}
    return {str(name): {**_cedar_type(sub), "required": False} for name, sub in properties.items()}


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    """Add ``more``'s attributes to ``into``; two records of one name merge theirs."""
    for name, kind in more.items():
        have = into.get(name)
        if have is None:
            into[name] = kind
        elif have["type"] == "Record" and kind["type"] == "Record":
            _merge(have["attributes"], kind["attributes"])


def request_schema(input_schemas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A Cedar schema (JSON form) of the requests toolproof builds for these tools.

    Principal ``Agent``, action ``call_tool``, resource ``Tool`` with
    :data:`TOOL_ATTRIBUTES`, context with :data:`CONTEXT_ATTRIBUTES`, where
    ``arguments`` has every tool's arguments (each optional, typed from its JSON
    Schema where Cedar has the type).

    Args:
        input_schemas: each tool's input JSON Schema.

    """
    arguments: dict[str, Any] = {}
    for schema in input_schemas:
        _merge(arguments, _record(schema.get("properties")))
    tool = {
        "read_only": {"type": "Boolean"},
        "destructive": {"type": "Boolean"},
        "source": {"type": "String"},
        "server": {"type": "String"},
    }
    context = {
        "arguments": {"type": "Record", "attributes": arguments},
        "calls": {"type": "Long"},
        "total_calls": {"type": "Long"},
        "elapsed_seconds": {"type": "Long"},
    }
    applies = {
        "principalTypes": ["Agent"],
        "resourceTypes": ["Tool"],
        "context": {"type": "Record", "attributes": context},
    }
    return {
        "": {
            "entityTypes": {
                "Agent": {},
                "Tool": {"shape": {"type": "Record", "attributes": tool}},
            },
            "actions": {"call_tool": {"appliesTo": applies}},
        }
    }


def _line_of(statement: Statement | None, word: str, after: tuple[str, ...]) -> int:
    """The line of the first token ``word`` right after one of ``after`` in ``statement``."""
    if statement is None:
        return 1
    words = [statement.text[start:end] for start, end in statement.tokens]
    for index in range(1, len(words)):
        if words[index] == word and words[index - 1] in after:
            return statement.lines[index]
    return statement.line


def _attribute_line(statement: Statement | None, name: str) -> int:
    """The line of the first ``.name``, ``["name"]`` or ``has name`` in ``statement``."""
    if statement is None:
        return 1
    words = [statement.text[start:end] for start, end in statement.tokens]
    for index in range(1, len(words)):
        if (words[index] == name and words[index - 1] in (".", "has")) or (
            words[index] == f'"{name}"' and words[index - 1] in ("[", "has")
        ):
            return statement.lines[index]
    return statement.line


def _policy_index(ident: str) -> int | None:
    """``N`` of Cedar's positional id ``policyN``, else ``None``."""
    return int(ident[6:]) if ident.startswith("policy") and ident[6:].isdigit() else None


def attribute_problems(cedar: Any, text: str, schema: dict[str, Any]) -> list[tuple[int, str]]:
    """Cedar validator's complaints that a policy of ``text`` names what no request has.

    Kept: an unknown attribute ("attribute ... not found") and an action other than
    ``Action::"call_tool"`` ("unrecognized action"). Cedar's other complaints (types
    it cannot prove, an optional argument read without ``has``, an entity type outside
    the schema) are about the generated schema's guesses, not about a name the request
    never has.

    Returns:
        ``(line, Cedar's message)`` per such complaint, in file order.

    """
    result = cedar.validate_policies(text, schema)
    found: list[tuple[int, str]] = []
    parts = statements(text)
    for error in result.errors:
        index = _policy_index(str(error.policy_id))
        if index is None:
            continue
        statement = parts[index] if index < len(parts) else None
        unknown = _UNKNOWN.search(error.error)
        action = _ACTION.search(error.error)
        if unknown is not None:
            name = unknown.group("path").rsplit(".", 1)[-1]
            found.append((_attribute_line(statement, name), error.error))
        elif action is not None:
            found.append((_line_of(statement, f'"{action.group("id")}"', ("::",)), error.error))
    return sorted(found, key=lambda item: item[0])


def scope_problems(cedar: Any, text: str, tools: Collection[str] | None) -> list[tuple[int, str]]:
    """A policy of ``text`` about a tool that is not there, or with an unknown ``@approval``.

    Args:
        cedar: the ``cedarpy`` module.
        text: one policy file (it parses).
        tools: every tool name the Toolset knows (bound, variants, quarantined);
            ``None``: tool names are not checked (a set read back from a run).

    Returns:
        ``(line, message)`` per problem, in file order: a resource scope ``==`` or
        ``in`` a ``Tool::"<name>"`` no tool has (such a policy never applies, so a
        misspelt name would pass unnoticed), and an ``@approval`` whose value is not
        ``"required"`` (a misspelt one would let the permit allow the call directly).

    """
    found: list[tuple[int, str]] = []
    parts: list[Statement] = []  # split only when a policy has a problem to place

    def statement_of(ident: str) -> Statement | None:
        if not parts:
            parts.extend(statements(text))
        index = _policy_index(ident)
        return parts[index] if index is not None and index < len(parts) else None

    static = json.loads(cedar.policies_to_json_str(text)).get("staticPolicies") or {}
    for ident, policy in static.items():
        annotations = policy.get("annotations") or {}
        if "approval" in annotations and annotations["approval"] != "required":
            value = json.dumps(annotations["approval"])
            found.append(
                (
                    _line_of(statement_of(ident), "approval", ("@",)),
                    f"@approval({value}) is not an approval toolproof knows (rule: "
                    '@approval("required") is the only one: the permit allows a call only '
                    "through an approve layer that asks a person)",
                )
            )
        scope = policy.get("resource") or {}
        entity = scope.get("entity")
        if (
            tools is not None
            and scope.get("op") in ("==", "in")
            and isinstance(entity, dict)
            and entity.get("type") == "Tool"
            and entity.get("id") not in tools
        ):
            name = str(entity.get("id"))
            shown = ", ".join(sorted(tools)) or "none"
            found.append(
                (
                    _line_of(statement_of(ident), json.dumps(name), ("::",)),
                    f"resource {scope['op']} Tool::{json.dumps(name)} names no tool of this "
                    f"Toolset (tools: {shown}; rule: a policy about one tool names a bound "
                    "or quarantined tool, so a misspelt name is noticed)",
                )
            )
    return sorted(found, key=lambda item: item[0])


def _admits(scope: Mapping[str, Any], tool: str) -> bool:
    """Whether a policy's resource scope (Cedar's JSON form) can hold for ``Tool::"<tool>"``."""
    op = scope.get("op")
    entity = scope.get("entity")
    if op == "==" and isinstance(entity, Mapping):
        return entity.get("type") == "Tool" and entity.get("id") == tool
    if op == "is":
        return scope.get("entity_type") == "Tool"
    return True  # All, in (the Tool entity has no parents: kept, Cedar answers), slots


def for_tool(policies: Mapping[str, Any], tool: str) -> dict[str, Any] | None:
    """The policy set (Cedar's JSON form) of the policies whose scope admits ``tool``.

    A policy whose resource scope cannot hold for ``Tool::"<tool>"`` (``resource ==
    Tool::"other"``, ``resource is Other``) is never satisfied by the tool's calls, and
    never evaluates its conditions, so it is never determining nor in error: the
    subset gives the same decision, determining ids (kept: the policies keep their
    ``policy<N>`` ids and annotations) and errors as the whole set.

    Args:
        policies: ``cedarpy.policies_to_json_str``'s object (``staticPolicies``, ...).
        tool: the called tool's name.

    Returns:
        The subset's JSON object, or ``None`` when it is the whole set (or the set has
        templates, which are left to Cedar).

    """
    static = policies.get("staticPolicies") or {}
    if policies.get("templates") or policies.get("templateLinks"):
        return None
    kept = {
        ident: policy
        for ident, policy in static.items()
        if _admits(policy.get("resource") or {}, tool)
    }
    if len(kept) == len(static):
        return None
    return {"staticPolicies": kept, "templates": {}, "templateLinks": []}


def tool_attributes(tool: Any) -> dict[str, Any]:
    """The Cedar attributes of ``Tool::"<name>"`` for a :class:`~toolproof.tools.tool.Tool`.

    Returns:
        ``read_only`` and ``destructive`` (its MCP annotations; an unstated hint is
        ``false``), ``source`` (``python:mod.fn``, ``mcp:<server>``, ...) and ``server``
        (the ``[[mcp]]`` server's name for a tool it serves, else ``""``: Cedar has no
        null).

    """
    hints = tool.spec.annotations
    source = str(tool.source)
    return {
        "read_only": hints.readOnlyHint is True,
        "destructive": hints.destructiveHint is True,
        "source": source,
        "server": source.removeprefix("mcp:") if source.startswith("mcp:") else "",
    }
