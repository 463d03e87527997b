"""``extractive``: answer each retrieve step's query with sentences cut from its chunks.

For every ``retrieve`` step that finished ok (its value is the retrieval tool's
``{"query", "hits", ...}``), the query it searched for is the question;
:func:`toolproof.evidence.extractive.answer_question` picks the answer sentence
and its ``min_supports`` supporting sentences from that step's chunks. Each
answer becomes one ``derived`` claim whose supports are the sentences' exact
byte spans inside the chunk files and whose citations quote them. A question
with fewer qualifying sentences than ``min_supports`` gets no answer: its record
has status ``insufficient_evidence``, the question as statement, no supports,
and a reason; nothing is asserted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.contract.evidence import Citation, Claim
from toolproof.errors import InputError, validation_problem
from toolproof.evidence.extractive import EvidenceText, answer_question
from toolproof.evidence.reasoners import (
    Reasoner,
    ReasonerRequest,
    StepOutput,
    retrieve_question,
)

__all__ = ["ExtractiveReasoner"]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_coverage: float = Field(default=0.5, gt=0, le=1)
    min_term_share: float = Field(default=0.5, gt=0, le=1)
    steps: list[str] | None = None


class ExtractiveReasoner(Reasoner):
    """``extractive``: one claim per retrieve step; see the module docstring.

    Params: ``min_coverage`` (0..1, default 0.5), ``min_term_share`` (0..1, default
    0.5) and ``steps`` (the retrieve steps to answer; default every one, in plan order).
    """

    name = "extractive"
    version = "1"

    def check_params(self, params: dict[str, Any]) -> None:
        """Check the parameters.

        Raises:
            InputError: an unknown key or a value out of range.
        """
        try:
            self.params = _Params.model_validate(params)
        except ValidationError as exc:
            first = validation_problem(exc)
            where = first.where
            raise InputError(
                f"reasoner 'extractive' params: {where}: {first.message}", reasoner=self.name
            ) from None

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        """Answer every retrieve step's query from its own chunks."""
        claims: list[Claim] = []
        wanted = self.params.steps
        for step, output in request.outputs.items():
            if wanted is not None and step not in wanted:
                continue
            question = retrieve_question(output)
            if question is None:
                continue
            claims.append(self._answer(question, output, request))
        return claims

    def _answer(self, question: str, output: StepOutput, request: ReasonerRequest) -> Claim:
        chunks = [record for record in output.evidence if record.source.kind == "chunk"]
        texts = [
            EvidenceText(
                record.id,
                request.store.read(record.id),
                int(rank) if isinstance(rank := record.source.detail.get("rank"), int) else 1,
            )
            for record in chunks
        ]
        answer = answer_question(
            question,
            texts,
            min_supports=request.min_supports,
            min_coverage=self.params.min_coverage,
            min_term_share=self.params.min_term_share,
        )
        if answer is None:
            return self.insufficient(
                question,
                f"fewer than min_supports = {request.min_supports} sentences of the "
                f"{len(chunks)} retrieved chunks answer the question; nothing is asserted",
            )
        supports = []
        citations = []
        for index, sentence in enumerate(answer.supports):
            supports.append(
                request.store.support(sentence.evidence_id, sentence.start, sentence.end)
            )
            data = request.store.read(sentence.evidence_id)[sentence.start : sentence.end]
            citations.append(Citation(support=index, text=data.decode("utf-8")))
        return self.validated(
            answer.statement,
            supports,
            citations,
            confidence=answer.confidence,
            reason=f"answers {question!r}",
        )
