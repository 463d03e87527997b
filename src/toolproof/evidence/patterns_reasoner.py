"""``patterns``: claims filled from regular-expression matches in text tool results.

Many tools answer in text (``git show``, ``git log``, a log file, a web page):
there is no JSON path to cite, but a line is. Each claim template names a step and,
for every ``{placeholder}`` of its statement, a pattern whose first capturing group
is the value. The pattern is searched in that step's evidence bytes (the exact
UTF-8 text of the tool's string result); the group's byte span is the support.
A template any of whose patterns does not match becomes an
``insufficient_evidence`` claim naming the pattern, so does one with fewer
supports than ``min_supports``.

Patterns use the ``regex`` module (Perl-like syntax, ``MULTILINE`` on) with a time
limit per search, so a pattern written to backtrack forever is stopped, not obeyed.
"""

from __future__ import annotations

from typing import Any

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.contract.evidence import Citation, Claim, SupportRef
from toolproof.errors import InputError, validation_problem
from toolproof.evidence.reasoners import (
    PLACEHOLDER,
    Reasoner,
    ReasonerRequest,
)

__all__ = ["MAX_PATTERN_CHARS", "SEARCH_TIMEOUT_SECONDS", "PatternsReasoner"]

MAX_PATTERN_CHARS = 500
"""The longest pattern accepted, in characters."""
SEARCH_TIMEOUT_SECONDS = 1.0
"""The time one pattern may search one evidence file, in seconds."""


class _Template(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    statement: str = Field(min_length=1)
    step: str
    patterns: dict[str, str]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    claims: list[_Template] = Field(min_length=1)


def _ordered(statement: str, keys: dict[str, Any]) -> list[str]:
    """Placeholders in statement order, then the other keys sorted.

    Never the mapping's own order: a spec read back from ``spec.json`` has its keys
    sorted, and frozen replay must cite in the same order as the live run.
    """
    first = list(dict.fromkeys(p for p in PLACEHOLDER.findall(statement) if p in keys))
    return first + sorted(set(keys) - set(first))


class PatternsReasoner(Reasoner):
    """``patterns``: see the module docstring.

    Params: ``claims``, a list of ``{statement, step, patterns}``; ``patterns`` maps
    each placeholder of ``statement`` to a pattern with one capturing group.
    """

    name = "patterns"
    version = "1"

    def check_params(self, params: dict[str, Any]) -> None:
        """Check the templates and compile every pattern.

        Raises:
            InputError: an unknown key, a placeholder without a pattern, a pattern that
                does not compile, has no capturing group, or is too long.
        """
        try:
            parsed = _Params.model_validate(params)
        except ValidationError as exc:
            first = validation_problem(exc)
            where = first.where
            raise InputError(
                f"reasoner 'patterns' params: {where}: {first.message}", reasoner=self.name
            ) from None
        self.compiled: list[tuple[_Template, dict[str, Any]]] = []
        for index, template in enumerate(parsed.claims):
            where = f"reasoner 'patterns' params: claims[{index}]"
            for placeholder in PLACEHOLDER.findall(template.statement):
                if placeholder not in template.patterns:
                    raise InputError(
                        f"{where}: placeholder {{{placeholder}}} has no entry in 'patterns'",
                        reasoner=self.name,
                    )
            compiled = {}
            for key in _ordered(template.statement, template.patterns):
                pattern = template.patterns[key]
                if len(pattern) > MAX_PATTERN_CHARS:
                    raise InputError(
                        f"{where}: pattern {key!r} is longer than {MAX_PATTERN_CHARS} characters",
                        reasoner=self.name,
                    )
                try:
                    compiled[key] = regex.compile(pattern, regex.MULTILINE)
                except regex.error as exc:
                    raise InputError(
                        f"{where}: pattern {key!r} does not compile: {exc}", reasoner=self.name
                    ) from None
                if compiled[key].groups < 1:
                    raise InputError(
                        f"{where}: pattern {key!r} has no capturing group (the group is cited)",
                        reasoner=self.name,
                    )
            self.compiled.append((template, compiled))

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """Fill each template from its step's text evidence."""
        return [self._claim(template, patterns, request) for template, patterns in self.compiled]

    def _claim(
        self, template: _Template, patterns: dict[str, Any], request: ReasonerRequest
    ) -> Claim:
        output = request.outputs.get(template.step)
        if output is None or not output.ok or not output.evidence:
            why = "did not run" if output is None else output.reason or "has no evidence"
            return self._insufficient(template, f"step {template.step!r} {why}")
        record = output.evidence[0]
        data = request.store.read(record.id)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._insufficient(template, f"step {template.step!r} evidence is not text")
        supports: list[SupportRef] = []
        citations: list[Citation] = []
        values: dict[str, str] = {}
        for key, pattern in patterns.items():
            try:
                match = pattern.search(text, timeout=SEARCH_TIMEOUT_SECONDS)
            except TimeoutError:
                return self._insufficient(
                    template, f"pattern {key!r} ran past {SEARCH_TIMEOUT_SECONDS} s and was stopped"
                )
            if match is None or match.group(1) is None or match.group(1) == "":
                return self._insufficient(
                    template, f"pattern {key!r} found nothing in step {template.step!r}"
                )
            start = len(text[: match.start(1)].encode("utf-8"))
            end = start + len(match.group(1).encode("utf-8"))
            citations.append(Citation(support=len(supports), text=match.group(1)))
            supports.append(request.store.support(record.id, start, end))
            values[key] = match.group(1)
        return self.filled(template.statement, values, supports, citations, request.min_supports)

    def _insufficient(self, template: _Template, reason: str) -> Claim:
        return self.insufficient(template.statement, reason)
