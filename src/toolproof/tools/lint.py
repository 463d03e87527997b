r"""Tool-description lint: invisible Unicode, text addressed to the model, shadowing.

:func:`lint_definition` reads one tool definition (the lock's view of a spec, MCP
field names: ``name``, ``title``, ``description``, ``inputSchema``, ``outputSchema``)
and returns its :class:`Finding` s. Every string is read: the name, title and
description, and in both schemas every member name and every string value
(descriptions, titles, ``enum`` values, ``default`` s, patterns). Three families of
rules (docs/lint.md has the table):

* invisible or direction-changing Unicode, in every string and member name:
  ``unicode-tag`` (U+E0000-U+E007F), ``zero-width`` (U+200B-U+200D, U+2060, U+FEFF
  after the first character), ``bidi-control`` (U+202A-U+202E, U+2066-U+2069,
  U+200E, U+200F, U+061C) -- high; ``invisible-char`` (every other format character,
  Hangul fillers, variation selectors 17-256) -- medium;
* text addressed to the model that tries to change its instructions, in string
  values: :data:`MODEL_RULES`, matched case-insensitively on the text with its
  invisible characters taken out (``ig<U+200B>nore`` is ``ignore``);
* ``shadowing``: a string value naming a tool of another source of the Toolset.

Offsets are code points (``offset``) and UTF-8 bytes (``byte_offset``) into the
string at ``field`` (a JSON pointer, RFC 6901, into the definition; ``key`` says the
string is the member name there, not its value). ``text`` is the offending text with
every invisible, control, space-like or combining character written as ``\uXXXX``
(:func:`escape_text`), so printing a finding never renders what it reports. The
rules themselves (severities, characters, patterns) are in
:mod:`toolproof.tools.lint_rules`, re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from toolproof.tools.lint_rules import (
    MODEL_RULES,
    RULE_IDS,
    FailOn,
    ModelRule,
    Severity,
    char_message,
    char_rule,
    escape_invisible,
    escape_text,
)

__all__ = [
    "MODEL_RULES",
    "RULE_IDS",
    "Allow",
    "FailOn",
    "Finding",
    "ModelRule",
    "OtherTool",
    "Severity",
    "escape_invisible",
    "escape_text",
    "lint_definition",
]


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Finding:
    """One lint finding.

    Attributes:
        rule: the rule id (``bidi-control``, ``override-instructions``, ``shadowing``...).
        severity: :class:`Severity`.
        tool: the bound tool name.
        field: a JSON pointer (RFC 6901) into the tool's definition.
        key: the string is the member name at ``field`` (not its value).
        offset: where the offending text starts in that string, in code points.
        byte_offset: the same place in the string's UTF-8 bytes.
        length: the offending text's length in code points.
        text: the offending text, escaped (:func:`escape_text`).
        message: what the rule found, for people (escaped too).

    """

    rule: str
    severity: Severity
    tool: str
    field: str
    key: bool
    offset: int
    byte_offset: int
    length: int
    text: str
    message: str

    def where(self) -> str:
        """``/description char 12 (byte 14)``, the pointer escaped."""
        part = " (member name)" if self.key else ""
        return (
            f"{escape_text(self.field) or '/'}{part} char {self.offset} (byte {self.byte_offset})"
        )

    def locked(self) -> dict[str, Any]:
        """What ``toolproof.lock`` keeps: rule, severity, field, key, offsets and text."""
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "field": self.field,
            "key": self.key,
            "offset": self.offset,
            "byte_offset": self.byte_offset,
            "text": self.text,
        }

    def to_json(self) -> dict[str, Any]:
        """Every attribute, as JSON."""
        return {**self.locked(), "tool": self.tool, "length": self.length, "message": self.message}

    def __str__(self) -> str:
        return f'{self.rule} ({self.severity}) at {self.where()}: "{self.text}": {self.message}'


@dataclass(frozen=True)
class Allow:
    """A ``[[lint.allow]]`` entry: findings of ``rule`` on tools matching ``tool`` pass.

    Attributes:
        tool: a glob over bound tool names (:func:`fnmatch.fnmatchcase`).
        rule: a rule id (:data:`RULE_IDS`).

    An allowed finding is still reported and pinned in the lock; it never quarantines
    a tool nor fails ``toolproof tools lint``.
    """

    tool: str
    rule: str

    def allows(self, finding: Finding) -> bool:
        """Whether ``finding`` is one this entry lets pass."""
        return finding.rule == self.rule and fnmatchcase(finding.tool, self.tool)


@dataclass(frozen=True)
class OtherTool:
    """A tool another description may name: its bound name, other names and owner.

    Attributes:
        name: the bound name (``mail_send_email``).
        owner: its source (``mcp:mail``); tools of the linted tool's own owner are skipped.
        aliases: other names a model may know it by (the name its MCP server reported).

    """

    name: str
    owner: str
    aliases: tuple[str, ...] = ()


_TOKEN = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")
_PLAIN = re.compile(r"[A-Za-z]+")
_AFTER_TOOL = re.compile(r"\s+tool\b")
_QUOTES = "`'\""


def _names(others: Sequence[OtherTool], owner: str, tool: str) -> dict[str, list[OtherTool]]:
    """The tools of other owners by every name they go by."""
    index: dict[str, list[OtherTool]] = {}
    for other in others:
        if other.owner != owner and other.name != tool:
            for name in dict.fromkeys((other.name, *other.aliases)):
                index.setdefault(name, []).append(other)
    return index


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _mentioned(text: str, start: int, end: int) -> bool:
    """Whether the name token ``text[start:end]`` is a mention of a tool.

    A name with a ``_``, ``-``, ``.`` or digit is one as a whole token; a plain word
    only between quotes or backticks, or right before or after the word ``tool``.
    """
    if start and text[start - 1] == ".":
        return False
    if _PLAIN.fullmatch(text, start, end) is None:
        return True
    before, after = text[start - 1 : start], text[end : end + 1]
    if before and after and before in _QUOTES and after in _QUOTES:
        return True
    if _AFTER_TOOL.match(text, end):
        return True
    return (
        start >= 5
        and text[start - 5 : start - 1] == "tool"
        and text[start - 1].isspace()
        and (start == 5 or not _is_word(text[start - 6]))
    )


class _Projection:
    """A string with its invisible characters taken out, and the way back to offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.kept: list[int] | None = None  # None: nothing was taken out (ASCII)
        self.visible = text
        if not text.isascii():
            self.kept = [i for i in range(len(text)) if char_rule(text, i) is None]
            self.visible = "".join(text[i] for i in self.kept)

    def span(self, start: int, end: int) -> tuple[int, int]:
        if self.kept is None:
            return start, end
        return self.kept[start], self.kept[end - 1] + 1


def _strings(definition: dict[str, Any]) -> Iterator[tuple[str, bool, str]]:
    """``(pointer, is_key, text)`` of every string of the definition, in document order."""
    stack: list[tuple[str, Any]] = []
    for top in ("name", "title", "description", "inputSchema", "outputSchema"):
        if top in definition:
            stack.append((f"/{top}", definition[top]))
    stack.reverse()
    while stack:
        pointer, value = stack.pop()
        if isinstance(value, str):
            yield pointer, False, value
        elif isinstance(value, dict):
            children = []
            for key, child in value.items():
                where = f"{pointer}/{_pointer_part(str(key))}"
                yield where, True, str(key)
                children.append((where, child))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{pointer}/{i}", child) for i, child in enumerate(value)]))


class _Collector:
    def __init__(self, tool: str, pointer: str, key: bool, text: str) -> None:
        self.tool, self.pointer, self.key, self.text = tool, pointer, key, text
        self.found: list[Finding] = []

    def add(self, rule: str, severity: Severity, start: int, end: int, message: str) -> None:
        self.found.append(
            Finding(
                rule=rule,
                severity=severity,
                tool=self.tool,
                field=self.pointer,
                key=self.key,
                offset=start,
                byte_offset=len(self.text[:start].encode("utf-8", "surrogatepass")),
                length=end - start,
                text=escape_text(self.text[start:end]),
                message=message,
            )
        )


def _unicode(out: _Collector) -> None:
    text, index = out.text, 0
    if text.isascii():
        return  # every rule's characters are beyond ASCII
    while index < len(text):
        hit = char_rule(text, index)
        if hit is None:
            index += 1
            continue
        end = index + 1
        while end < len(text) and char_rule(text, end) == hit:
            end += 1
        out.add(hit[0], hit[1], index, end, char_message(hit[0], text[index:end]))
        index = end


def _model(out: _Collector, projection: _Projection) -> None:
    hits: list[tuple[int, int, ModelRule]] = []
    for rule in MODEL_RULES:
        for match in rule.pattern.finditer(projection.visible):
            if match.end() > match.start():
                hits.append((*projection.span(match.start(), match.end()), rule))
    for start, end, rule in hits:
        covered = any(
            s <= start and end <= e and other.severity.rank > rule.severity.rank
            for s, e, other in hits
        )
        if not covered:  # a secret path inside a read-secret finding is reported once
            out.add(rule.id, rule.severity, start, end, rule.message)


def _shadowing(
    out: _Collector, projection: _Projection, owner: str, names: dict[str, list[OtherTool]]
) -> None:
    text = projection.visible
    for match in _TOKEN.finditer(text):
        for other in names.get(match.group(), ()):
            if _mentioned(text, match.start(), match.end()):
                start, end = projection.span(match.start(), match.end())
                out.add(
                    "shadowing",
                    Severity.MEDIUM,
                    start,
                    end,
                    f"names the tool {other.name!r} of {other.owner}, another source "
                    f"(this tool is from {owner}): a description steering another tool",
                )


def lint_definition(
    definition: dict[str, Any],
    *,
    tool: str,
    owner: str = "",
    others: Sequence[OtherTool] = (),
) -> list[Finding]:
    """Every finding of one tool definition, by field (document order), then offset.

    Args:
        definition: the definition with MCP field names (:func:`toolproof.tools.lock.locked_spec`).
        tool: the bound tool name (named in each finding).
        owner: the tool's source (``mcp:fs``, ``python:pkg.mod``); tools of the same
            owner may name each other.
        others: the other tools of the Toolset (for ``shadowing``).

    Returns:
        The findings; ``[]`` for a clean definition.

    """
    findings: list[Finding] = []
    names = _names(others, owner, tool)
    for pointer, key, text in _strings(definition):
        out = _Collector(tool, pointer, key, text)
        _unicode(out)
        if not key and pointer != "/name":
            projection = _Projection(text)
            _model(out, projection)
            _shadowing(out, projection, owner, names)
        findings += sorted(out.found, key=lambda f: (f.offset, -f.severity.rank, f.rule))
    return findings
