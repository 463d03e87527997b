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
(:func:`escape_text`), so printing a finding never renders what it reports.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "MODEL_RULES",
    "FailOn",
    "Finding",
    "ModelRule",
    "OtherTool",
    "Severity",
    "escape_invisible",
    "escape_text",
    "lint_definition",
]


class Severity(StrEnum):
    """How bad a finding is: ``high`` > ``medium`` > ``low``."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """3 for high, 2 for medium, 1 for low."""
        return {"high": 3, "medium": 2, "low": 1}[self.value]


class FailOn(StrEnum):
    """``[lint] fail_on``: the least severity that quarantines a tool (``never``: none)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NEVER = "never"

    def fails(self, severity: Severity) -> bool:
        """Whether a finding of ``severity`` is at or above this threshold."""
        return self is not FailOn.NEVER and severity.rank >= Severity(self.value).rank


_SAFE_CATEGORIES = ("L", "N", "P", "S")


def escape_text(text: str) -> str:
    r"""``text`` with ``\`` and every character that may not render as itself escaped.

    Kept: printable ASCII and every letter, digit, punctuation or symbol. Escaped as
    ``\uXXXX`` (or ``\U000XXXXX`` beyond the BMP): controls, format characters
    (bidi, zero-width, tags), surrogates, unassigned and private-use code points,
    every space but U+0020, and combining marks. A backslash is written ``\\``.
    """
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0x20 <= code < 0x7F or (
            code > 0x7F and unicodedata.category(char)[0] in _SAFE_CATEGORIES
        ):
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def escape_invisible(text: str) -> str:
    r"""``text`` with only its controls, format characters and line separators escaped.

    For a line whose backslashes are escaped already (the canonical JSON of a value):
    every character of category Cc, Cf, Zl or Zp, and every code point the lint
    reports as invisible (tags, zero-width, bidi controls, Hangul fillers, variation
    selectors 17-256), is written ``\uXXXX`` (``\U000XXXXX`` beyond the BMP);
    everything else, ``\`` included, is kept.
    """
    if text.isascii() and text.isprintable():
        return text
    out = []
    for index, char in enumerate(text):
        code = ord(char)
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") or (
            code > 0x7F and _char_rule(text, index) is not None
        ):
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


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
class ModelRule:
    """A pattern of text addressed to the model (matched case-insensitively)."""

    id: str
    severity: Severity
    pattern: re.Pattern[str]
    message: str


def _rule(rule_id: str, severity: Severity, pattern: str, message: str) -> ModelRule:
    return ModelRule(rule_id, severity, re.compile(pattern, re.IGNORECASE), message)


_SECRET = (
    r"(?:(?:~|\$HOME)/)?(?:\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials\b"
    r"|\.netrc\b|\.pgpass\b|\.git-credentials\b|\.kube/config\b|\.docker/config\.json"
    r"|\.gnupg\b|/etc/shadow\b|\.cursor/mcp\.json|claude_desktop_config\.json)"
    r"(?:[\w./\-]*[\w\-])?"
)
_FILLER = (
    r"(?:all|any|the|your|my|our|previous|prior|above|earlier|preceding|former|existing"
    r"|original|other|system|developer|of|these|those|every|safety)"
)
_TELL = r"(?:tell|inform|mention|reveal|notify|alert|disclose)"
_TELLING = r"(?:telling|informing|mentioning|revealing|notifying|alerting|disclosing)"
_NOT = r"(?:do\s+not|don['\u2019]?t|never|must\s+not|should\s+not|shall\s+not)"

MODEL_RULES: tuple[ModelRule, ...] = (
    _rule(
        "override-instructions",
        Severity.HIGH,
        rf"\b(?:ignore|disregard|forget|override|bypass)\s+(?:{_FILLER}\s+){{0,4}}"
        r"(?:instructions?|directions?|directives?|guidelines|guidance|prompts?)\b",
        "tells the model to set aside its instructions",
    ),
    _rule(
        "conceal-from-user",
        Severity.HIGH,
        rf"\b{_NOT}\s+(?:\w+\s+){{0,2}}?{_TELL}(?:\s+\w+){{0,3}}?\s+(?:the\s+)?users?\b"
        rf"|\bwithout\s+{_TELLING}\s+(?:the\s+)?users?\b"
        r"|\b(?:hide|conceal|keep)\s+(?:\w+\s+){0,3}?from\s+the\s+users?\b"
        r"|\bthe\s+users?\s+(?:must|should|need|may)\s*(?:not|never|n['\u2019]t)\s+"
        r"(?:know|see|find\s+out|learn|notice)\b",
        "tells the model to keep something from the user",
    ),
    _rule(
        "read-secret",
        Severity.HIGH,
        r"\b(?:read|cat|open|load|send|include|pass|upload|attach|copy|forward|email|post"
        rf"|exfiltrate|print|dump)\b[^.!?\n]{{0,80}}?{_SECRET}",
        "tells the model to read or send a credential file",
    ),
    _rule(
        "secret-path",
        Severity.MEDIUM,
        _SECRET,
        "names a credential file",
    ),
    _rule(
        "model-markup",
        Severity.MEDIUM,
        r"</?\s*(?:important|system|instructions?|critical|admin|hidden)\s*>"
        r"|\[/?INST\]|<\|(?:im_start|im_end|system|user|assistant)\|>",
        "markup addressed to the model (prompt-injection style)",
    ),
    _rule(
        "system-prompt",
        Severity.MEDIUM,
        r"\b(?:system|developer)\s+(?:prompts?|messages?|instructions?)\b",
        "refers to the model's system prompt",
    ),
    _rule(
        "precondition",
        Severity.LOW,
        r"\bbefore\s+(?:using|calling|invoking|running|executing)\s+(?:this|the|any|other)"
        r"\s+tools?\b",
        "tells the model what to do before using the tool: check what it asks",
    ),
)
"""The patterns of text addressed to the model, in the order findings are reported.

High: telling the model to drop its instructions, to hide something from the user, or
to read or send a credential file (text no tool needs to do its job). Medium: a
credential path alone, pseudo-markup (``<IMPORTANT>``, ``[INST]``) and mentions of the
system prompt (common in attacks, but a legitimate tool may say them). Low: a
precondition (``before using this tool``), worth a look."""

_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF})
_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})


def _joins_script(text: str, index: int) -> bool:
    """A ZWNJ/ZWJ between two non-ASCII letters or symbols (emoji, Indic, Persian)."""
    if index == 0 or index + 1 >= len(text):
        return False
    around = (text[index - 1], text[index + 1])
    return all(ord(c) > 0x7F and unicodedata.category(c)[0] in ("L", "M", "S") for c in around)


def _char_rule(text: str, index: int) -> tuple[str, Severity] | None:
    code = ord(text[index])
    if 0xE0000 <= code <= 0xE007F:
        return "unicode-tag", Severity.HIGH
    if code in _BIDI:
        return "bidi-control", Severity.HIGH
    if code in _ZERO_WIDTH:
        if code == 0xFEFF and index == 0:
            return None  # a byte-order mark at the start
        if code in (0x200C, 0x200D) and _joins_script(text, index):
            return "zero-width", Severity.LOW
        return "zero-width", Severity.HIGH
    if code in _FILLERS or 0xE0100 <= code <= 0xE01EF or unicodedata.category(text[index]) == "Cf":
        return "invisible-char", Severity.MEDIUM
    return None


def _char_message(rule: str, run: str) -> str:
    if rule == "unicode-tag":
        hidden = "".join(chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E)
        return (
            f"{len(run)} invisible Unicode tag characters; a model reads them as "
            f"{escape_text(hidden)!r}"
        )
    first = run[0]
    name = unicodedata.name(first, "unnamed")
    kinds = {
        "bidi-control": "bidi control that changes how the text around it is displayed",
        "zero-width": "zero-width character hidden in the text",
        "invisible-char": "invisible character",
    }
    more = f" (and {len(run) - 1} more)" if len(run) > 1 else ""
    return f"U+{ord(first):04X} {name}{more}: {kinds[rule]}"


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
            self.kept = [i for i in range(len(text)) if _char_rule(text, i) is None]
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
        hit = _char_rule(text, index)
        if hit is None:
            index += 1
            continue
        end = index + 1
        while end < len(text) and _char_rule(text, end) == hit:
            end += 1
        out.add(hit[0], hit[1], index, end, _char_message(hit[0], text[index:end]))
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
