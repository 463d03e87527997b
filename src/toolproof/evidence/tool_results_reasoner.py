"""The ``tool-results`` reasoner: claims filled from tool values, each cited byte for byte."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from toolproof.contract.evidence import (
    Citation,
    Claim,
    SupportRef,
)
from toolproof.errors import InputError, validation_problem
from toolproof.evidence.encoding import locate, parse_ref
from toolproof.evidence.reasoners import PLACEHOLDER, Reasoner, ReasonerRequest
from toolproof.identity import canonical_json

__all__ = ["ToolResultReasoner"]


class _ClaimTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    statement: str
    cite: dict[str, str]


class _ToolResultParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    claims: list[_ClaimTemplate] = []


def _text_of(value: Any) -> str:
    return value if type(value) is str else canonical_json(value).decode("utf-8")


class ToolResultReasoner(Reasoner):
    """``tool-results``: claims filled from tool values, each value cited byte for byte.

    Params: ``claims``, a list of ``{statement, cite}``; ``cite`` maps a placeholder
    name used as ``{name}`` in the statement to a reference
    ``steps.<step>.value[.<key>|.<index>]...``. Each cited value becomes one support:
    its bytes inside the step's evidence file (for a string without escapes, the
    characters between the quotes). A template whose references do not all resolve
    (a failed step, a missing key) becomes an ``insufficient_evidence`` claim saying
    which; so does one with fewer cited values than ``min_supports``.
    """

    name = "tool-results"
    version = "1"

    def check_params(self, params: dict[str, Any]) -> None:
        """Check ``claims``; every placeholder must be cited and every reference well-formed.

        Raises:
            InputError: unknown keys, a bad reference or an uncited placeholder.

        """
        try:
            parsed = _ToolResultParams.model_validate(params)
        except ValidationError as exc:
            first = validation_problem(exc)
            where = first.where
            raise InputError(
                f"reasoner 'tool-results' params: {where}: {first.message}", reasoner=self.name
            ) from None
        for index, template in enumerate(parsed.claims):
            for ref in template.cite.values():
                parse_ref(ref)
            for placeholder in PLACEHOLDER.findall(template.statement):
                if placeholder not in template.cite:
                    raise InputError(
                        f"reasoner 'tool-results' params: claims[{index}]: placeholder "
                        f"{{{placeholder}}} has no entry in 'cite'",
                        reasoner=self.name,
                    )
        self.templates = parsed.claims

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """Fill each template; see the class docstring."""
        return [self._claim(template, request) for template in self.templates]

    def _claim(self, template: _ClaimTemplate, request: ReasonerRequest) -> Claim:
        supports: list[SupportRef] = []
        citations: list[Citation] = []
        values: dict[str, str] = {}
        placeholders = list(dict.fromkeys(PLACEHOLDER.findall(template.statement)))
        ordered = [p for p in placeholders if p in template.cite]
        ordered += sorted(set(template.cite) - set(ordered))
        # Statement order, never the mapping's: spec.json has sorted keys, and a frozen
        # replay must cite in the same order as the live run.
        for placeholder in ordered:
            ref = template.cite[placeholder]
            step, path = parse_ref(ref)
            output = request.outputs.get(step)
            problem = None
            if output is None:
                problem = f"step {step!r} did not run"
            elif not output.ok or not output.evidence:
                problem = f"step {step!r} has no result: {output.reason or 'no evidence'}"
            if problem is None and output is not None:
                try:
                    start, end, part = locate(output.value, path)
                except KeyError as exc:
                    problem = f"{ref}: {exc.args[0]}"
                else:
                    record = output.evidence[0]
                    support = request.store.support(record.id, start, end)
                    data = request.store.read(record.id)[start:end]
                    citations.append(Citation(support=len(supports), text=data.decode("utf-8")))
                    supports.append(support)
                    values[placeholder] = _text_of(part)
            if problem is not None:
                return self._insufficient(template, problem)
        return self.filled(template.statement, values, supports, citations, request.min_supports)

    def _insufficient(self, template: _ClaimTemplate, reason: str) -> Claim:
        return self.insufficient(template.statement, reason)
