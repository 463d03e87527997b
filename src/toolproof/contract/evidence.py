"""Evidence, supports and claims: what a run's answer rests on, down to the byte.

* An :class:`EvidenceRecord` describes one evidence file stored exactly under
  ``evidence/<hex>`` of a run directory (``<hex>`` is the SHA-256 of its bytes).
* A :class:`SupportRef` names a non-empty byte interval ``[start, end)`` *within that
  evidence file* (never within the document it came from) and the SHA-256 of those
  bytes.
* A :class:`Claim` is a statement, its type (``assumed`` | ``observed`` |
  ``derived``), its status, its supports and its citations; a citation quotes the
  exact text of one support.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Self

from pydantic import Field, JsonValue, model_validator

from toolproof.contract.base import CanonicalModel, ContentModel
from toolproof.contract.layout import evidence_path

__all__ = [
    "EVIDENCE_ID_RE",
    "Citation",
    "Claim",
    "ClaimStatus",
    "ClaimType",
    "EvidenceRecord",
    "EvidenceSource",
    "SupportRef",
    "evidence_id_for",
    "evidence_path_for",
]

EVIDENCE_ID_RE = re.compile(r"^evidence_[0-9a-f]{64}$")
"""An evidence id: ``evidence_`` + the SHA-256 hex of the evidence bytes."""


def evidence_id_for(sha256_digest: str) -> str:
    """The evidence id of bytes whose digest is ``sha256:<hex>``: ``evidence_<hex>``."""
    return "evidence_" + sha256_digest.removeprefix("sha256:")


def evidence_path_for(evidence_id: str) -> str:
    """The relative POSIX path of an evidence file in a run directory: ``evidence/<hex>``."""
    return evidence_path(evidence_id.removeprefix("evidence_"))


class EvidenceSource(CanonicalModel):
    """Where evidence bytes came from.

    Attributes:
        kind: ``tool_result`` (the bytes of a tool call's value) or ``chunk`` (a
            retrieved chunk of a document); other runtimes may add kinds.
        step: the plan step that registered it.
        call: for ``tool_result``, the call id (``call_<hex>``) whose value it is.
        detail: kind-specific provenance, e.g. for a chunk ``document``,
            ``document_digest``, ``chunk`` (index) and ``document_start`` /
            ``document_end`` (byte offsets of the chunk in its document). Supports
            never use the document offsets: their intervals are within the chunk file.

    """

    kind: str
    step: str
    call: str | None = None
    detail: dict[str, JsonValue] = Field(default_factory=dict)


class EvidenceRecord(CanonicalModel):
    """One registration of evidence bytes in a run.

    Attributes:
        id: ``evidence_<hex>``, the SHA-256 hex of the bytes (identical bytes share a file).
        digest: ``sha256:<hex>`` of the bytes.
        size: the byte count.
        media_type: ``application/json`` (canonical JSON of a tool value) or
            ``text/plain; charset=utf-8`` (a string value or a text chunk).
        path: ``evidence/<hex>``, relative POSIX inside the run directory.
        source: where the bytes came from.

    """

    id: str = Field(pattern=EVIDENCE_ID_RE.pattern)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    size: int = Field(ge=0)
    media_type: str
    path: str
    source: EvidenceSource

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.id != evidence_id_for(self.digest):
            raise ValueError(f"evidence id {self.id} does not match digest {self.digest}")
        if self.path != evidence_path_for(self.id):
            raise ValueError(f"evidence path {self.path!r} must be {evidence_path_for(self.id)!r}")
        return self


class SupportRef(CanonicalModel):
    """A non-empty byte interval ``[start, end)`` within one evidence file.

    Attributes:
        evidence: the evidence id (``evidence_<hex>``).
        start: the first byte offset, counted from the start of the evidence file.
        end: one past the last byte; ``end > start``.
        sha256: ``sha256:<hex>`` of exactly the bytes ``[start, end)``.

    """

    evidence: str = Field(pattern=EVIDENCE_ID_RE.pattern)
    start: int = Field(ge=0)
    end: int = Field(ge=1)
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _non_empty(self) -> Self:
        if self.end <= self.start:
            raise ValueError(
                f"support interval [{self.start}, {self.end}) is empty (rule: end > start)"
            )
        return self


class ClaimType(StrEnum):
    """What a claim rests on: an assumption, an observation, or a derivation from evidence."""

    ASSUMED = "assumed"
    OBSERVED = "observed"
    DERIVED = "derived"


class ClaimStatus(StrEnum):
    """A claim's standing.

    ``validated`` (only for a derived claim with enough supports that pass every
    check), ``unvalidated`` (stated, not validated: assumptions, observations) or
    ``insufficient_evidence`` (the reasoner could not ground it and says so instead of
    inventing).
    """

    VALIDATED = "validated"
    UNVALIDATED = "unvalidated"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


class Citation(CanonicalModel):
    """A quotation of one support in a claim.

    Attributes:
        support: the index of the support in the claim's ``supports``.
        text: the exact text of that support's bytes (UTF-8); checked byte for byte.

    """

    support: int = Field(ge=0)
    text: str


class Claim(ContentModel):
    """A typed claim with its supports; its content id is ``claim_<hex>``.

    Attributes:
        statement: the claim in words.
        type: assumed, observed or derived.
        status: see :class:`ClaimStatus`.
        supports: the byte intervals the claim rests on.
        citations: quotations of supports (each quotes one support exactly).
        confidence: the reasoner's confidence in ``[0, 1]``.
        reasoner: the reasoner that emitted it (``name/version``).
        reason: why the status is what it is (e.g. what evidence is missing).

    """

    ID_KIND = "claim"

    statement: str
    type: ClaimType
    status: ClaimStatus
    supports: list[SupportRef] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    reasoner: str = ""
    reason: str = ""
