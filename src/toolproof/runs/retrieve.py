"""The ``retrieve`` step: search a pinned corpus and register each chunk's exact bytes.

A spec step ``kind = "retrieve"`` with ``params = {query, top_k, tool}`` calls the
retrieval tool (default ``retrieve``, bound from a ``[[retrieval]]`` entry of the
composition root) like any call step: the call is recorded, budgeted, and served
from the record in frozen replay, so a replay needs neither the corpus nor the
index. Then every hit's chunk is registered as evidence of its own (kind ``chunk``,
media type ``text/plain; charset=utf-8``): the bytes are exactly the chunk's bytes in
its document, with the document path, the document digest and the chunk's byte
offsets *in the document* as provenance. Supports cite offsets *within the chunk
file*, never within the document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolproof.contract.evidence import EvidenceRecord
from toolproof.contract.runs import PlanNode
from toolproof.errors import InputError, validation_problem
from toolproof.evidence.encoding import TEXT_MEDIA_TYPE
from toolproof.evidence.reasoners import StepOutput
from toolproof.runs.executor import StepContext, StepHandler
from toolproof.runs.reads import PromptStep, ReadStep
from toolproof.runs.traceindex import TraceIndex
from toolproof.tools.catalog import Catalog

__all__ = ["RetrieveParams", "RetrieveStep", "default_handlers"]


class RetrieveParams(BaseModel):
    """The ``params`` of a retrieve step.

    Attributes:
        query: what to search for (the question, for the extractive reasoner).
        top_k: how many chunks to retrieve (1..100).
        tool: the retrieval tool's name in the Toolset.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1)
    top_k: int = Field(default=5, ge=1, le=100)
    tool: str = "retrieve"


def _hits(value: Any, tool: str) -> list[dict[str, Any]]:
    hits = value.get("hits") if isinstance(value, dict) else None
    if not isinstance(hits, list) or not all(isinstance(hit, dict) for hit in hits):
        raise InputError(
            f"tool {tool!r} did not return retrieval hits (expected an object with a 'hits' list)",
            tool=tool,
        )
    return hits


class RetrieveStep:
    """The :class:`~toolproof.runs.executor.StepHandler` of ``retrieve`` steps."""

    async def __call__(self, node: PlanNode, context: StepContext) -> StepOutput:
        """Search, then register every hit's chunk bytes as ``chunk`` evidence.

        Raises:
            InputError: bad params, or the tool's value is not a list of hits whose text
                matches their byte offsets.
        """
        try:
            params = RetrieveParams.model_validate(node.params)
        except ValidationError as exc:
            first = validation_problem(exc)
            where = first.where
            raise InputError(f"retrieve step params: {where}: {first.message}") from None
        arguments = {"query": params.query, "top_k": params.top_k}
        result, record = await context.call_tool(params.tool, arguments)
        if result.failure is not None or record is None:
            return StepOutput(node.id, False, reason=result.failure.kind if result.failure else "")
        records: list[EvidenceRecord] = [record]
        for hit in _hits(result.value, params.tool):
            data = str(hit.get("text", "")).encode("utf-8")
            start, end = hit.get("start"), hit.get("end")
            if not isinstance(start, int) or not isinstance(end, int) or end - start != len(data):
                raise InputError(
                    f"retrieval hit {hit.get('chunk_id')!r}: text is {len(data)} bytes but its "
                    f"offsets [{start}, {end}) say otherwise",
                    tool=params.tool,
                )
            detail = {
                "query": params.query,
                "rank": hit.get("rank"),
                "score": hit.get("score"),
                "chunk_id": hit.get("chunk_id"),
                "document": hit.get("document"),
                "document_digest": hit.get("document_digest"),
                "document_start": start,
                "document_end": end,
            }
            records.append(
                context.register_evidence(
                    data, media_type=TEXT_MEDIA_TYPE, kind="chunk", detail=detail
                )
            )
        return StepOutput(node.id, True, result.value, tuple(records))


def default_handlers(
    *, catalog: Catalog | None = None, recording: TraceIndex | None = None
) -> dict[str, StepHandler]:
    """The step handlers every toolproof runtime has: ``retrieve``, ``read`` and ``prompt``.

    Args:
        catalog: the Toolset's resources and prompts, for live ``read`` and ``prompt``
            steps (``None``: such a step fails at its first live read).
        recording: the recorded trace's index frozen ``read`` and ``prompt`` steps are
            served from.

    """
    return {
        "retrieve": RetrieveStep(),
        "read": ReadStep(catalog, recording),
        "prompt": PromptStep(catalog, recording),
    }
