"""The run directory's layout: every file and folder name a bundle holds, named once.

A run directory (DESIGN.md section 7) is::

    spec.json  plan.json  runtime.json  trace.jsonl  claims.json  report.json
    timings.json  manifest.json  evidence.pack  evidence.idx

(a run written before the evidence pack holds ``evidence/<sha256 hex>`` files instead
of ``evidence.pack`` and ``evidence.idx``). Every module that writes, reads, lists or
names one of these files uses these names (and :func:`evidence_path` for an evidence
item's name), never a string literal, so the layout is changed or read in one place;
only :mod:`toolproof.bundle.evidence` knows where an item's bytes lie. It sits in
``contract/`` because the contract models themselves name files (the run id covers
every manifest entry but :data:`TIMINGS_FILE`; an evidence record names its item).
"""

from __future__ import annotations

__all__ = [
    "CLAIMS_FILE",
    "EVIDENCE_DIR",
    "EVIDENCE_INDEX_FILE",
    "EVIDENCE_PACK_FILE",
    "MANIFEST_FILE",
    "PLAN_FILE",
    "REPORT_FILE",
    "RUNTIME_FILE",
    "RUN_FILES",
    "SESSIONS_DIR",
    "SESSION_FILE",
    "SPEC_FILE",
    "TIMINGS_FILE",
    "TRACE_FILE",
    "evidence_path",
]

SESSIONS_DIR = "sessions"
"""Where live sessions live under the artifact root (beside ``runs/``), a directory each."""

SESSION_FILE = "session.json"
"""The marker of a live session directory: its recorder's header, the first file written."""

SPEC_FILE = "spec.json"
"""The run spec, canonical JSON (RFC 8785)."""

PLAN_FILE = "plan.json"
"""The plan, canonical JSON, with its content id."""

RUNTIME_FILE = "runtime.json"
"""The execution runtime (mode, the Toolset's descriptor, seed), canonical JSON."""

TRACE_FILE = "trace.jsonl"
"""The hash-chained trace: one canonical JSON event per LF-terminated line."""

CLAIMS_FILE = "claims.json"
"""The claims, a canonical JSON list."""

REPORT_FILE = "report.json"
"""The verification report, canonical JSON."""

TIMINGS_FILE = "timings.json"
"""Wall-clock timings; listed in the manifest but not covered by the run id."""

MANIFEST_FILE = "manifest.json"
"""Every other file with its size and digest, and the run id."""

EVIDENCE_DIR = "evidence"
"""The folder of evidence files of a run written before the pack (one file per item,
named by the SHA-256 hex of its bytes); ``evidence/<hex>`` also names an item in every
layout (an :class:`~toolproof.contract.evidence.EvidenceRecord`'s ``path``)."""

EVIDENCE_PACK_FILE = "evidence.pack"
"""Every evidence item of a run (or a live session), appended one after the other."""

EVIDENCE_INDEX_FILE = "evidence.idx"
"""The sorted index of a run's ``evidence.pack``: each item's digest, offset and size."""

RUN_FILES = (SPEC_FILE, PLAN_FILE, RUNTIME_FILE, TRACE_FILE, CLAIMS_FILE)
"""The files a run's view reads first (spec, plan, runtime, trace, claims), in that order."""


def evidence_path(hex_digest: str) -> str:
    """The name of the evidence item of ``hex_digest``: ``evidence/<hex>``.

    In a run written before the pack it is the item's file; in a packed run, the name
    an :class:`~toolproof.contract.evidence.EvidenceRecord` and a finding give it.

    Args:
        hex_digest: the 64 lowercase hex digits of the evidence bytes' SHA-256.

    """
    return f"{EVIDENCE_DIR}/{hex_digest}"
