r"""The rules of the tool-description lint: severities, characters and model-text patterns.

:mod:`toolproof.tools.lint` applies them (and ``shadowing``) to a tool definition;
docs/lint.md has the table. :func:`char_rule` classifies one character of a string
(``unicode-tag``, ``zero-width``, ``bidi-control``, ``invisible-char``);
:data:`MODEL_RULES` are the patterns of text addressed to the model;
:func:`escape_text` and :func:`escape_invisible` write a string so that a terminal
never renders what the lint reports.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "MODEL_RULES",
    "RULE_IDS",
    "FailOn",
    "ModelRule",
    "Severity",
    "char_message",
    "char_rule",
    "escape_invisible",
    "escape_text",
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
            code > 0x7F and char_rule(text, index) is not None
        ):
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


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
_TELL = r"(?:tell|inform|mention|reveal|disclose)"
_TELLING = r"(?:telling|informing|mentioning|revealing|disclosing)"
_USER = r"(?:the\s+)?users?\b(?!['\u2019]s)"  # not "the user's password"
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
        rf"\b{_NOT}\s+(?:\w+\s+){{0,2}}?{_TELL}(?:\s+\w+){{0,3}}?\s+{_USER}"
        rf"|\bwithout\s+{_TELLING}\s+{_USER}"
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

RULE_IDS: tuple[str, ...] = (
    "unicode-tag",
    "zero-width",
    "bidi-control",
    "invisible-char",
    *(rule.id for rule in MODEL_RULES),
    "shadowing",
)
"""Every rule id, in the order of docs/lint.md's table."""

_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF})
_FILLERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0})


def _joins_script(text: str, index: int) -> bool:
    """A ZWNJ/ZWJ between two non-ASCII letters or symbols (emoji, Indic, Persian)."""
    if index == 0 or index + 1 >= len(text):
        return False
    around = (text[index - 1], text[index + 1])
    return all(ord(c) > 0x7F and unicodedata.category(c)[0] in ("L", "M", "S") for c in around)


def char_rule(text: str, index: int) -> tuple[str, Severity] | None:
    """The rule and severity of the character ``text[index]``, or ``None`` when it is fine.

    ``text`` is given whole because two cases depend on the neighbours: U+FEFF at
    index 0 is a byte-order mark (fine), and a U+200C/U+200D between two non-ASCII
    letters or symbols is ``zero-width`` of severity low.
    """
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


def char_message(rule: str, run: str) -> str:
    """The message of a run of characters of one character ``rule`` (escaped).

    For ``unicode-tag`` it spells what the tags say (U+E0041 reads as ``A``);
    otherwise it names the first code point, how many follow, and what the rule is.
    """
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
