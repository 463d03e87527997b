"""The run directory's layout: every file and folder name a bundle holds, named once.

A run directory (DESIGN.md section 7) is::

    spec.json  plan.json  runtime.json  trace.jsonl  claims.json  report.json
    timings.json  manifest.json  evidence/<sha256 hex>

Every module that writes, reads, lists or names one of these files uses these
names (and :func:`evidence_path` for an evidence file), never a string literal, so
the layout is changed or read in one place. It sits in ``contract/`` because the
contract models themselves name files (the run id covers every manifest entry but
:data:`TIMINGS_FILE`; an evidence record names its path).
"""

from __future__ import annotations

__all__ = [
    "CLAIMS_FILE",
    "EVIDENCE_DIR",
    "MANIFEST_FILE",
    "PLAN_FILE",
    "REPORT_FILE",
    "RUNTIME_FILE",
    "RUN_FILES",
    "SPEC_FILE",
    "TIMINGS_FILE",
    "TRACE_FILE",
    "evidence_path",
]

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
"""The folder of evidence files, each named by the SHA-256 hex of its bytes."""

RUN_FILES = (SPEC_FILE, PLAN_FILE, RUNTIME_FILE, TRACE_FILE, CLAIMS_FILE)
"""The files a run's view reads first (spec, plan, runtime, trace, claims), in that order."""


def evidence_path(hex_digest: str) -> str:
    """The relative POSIX path of the evidence file of ``hex_digest``: ``evidence/<hex>``.

    Args:
        hex_digest: the 64 lowercase hex digits of the evidence bytes' SHA-256.

    """
    return f"{EVIDENCE_DIR}/{hex_digest}"
