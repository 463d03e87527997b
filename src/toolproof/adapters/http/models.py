"""Request and response bodies of the runs HTTP API (published in its OpenAPI document)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolproof.contract.runs import RunSpec

__all__ = [
    "Attestations",
    "CreateRun",
    "Health",
    "ReplayAnswer",
    "RunCreated",
    "RunDocuments",
    "RunPage",
    "RunSummary",
    "VerifyAnswer",
    "VerifyFailure",
]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateRun(_Closed):
    """``POST /v1/runs``: run a spec.

    Attributes:
        spec: the run spec (the same document as a spec file; see ``docs/runs.md``).
            Its ``toolset`` path is relative POSIX to the artifact root and must stay
            inside it.

    """

    spec: RunSpec = Field(description="The run spec.")


class RunSummary(_Closed):
    """One run in a listing.

    Attributes:
        run_id: the run id.
        task: the spec's task (``None`` when ``spec.json`` cannot be read).
        outcome: the stored report's outcome (``None`` when it cannot be read).
        started_at: when the run started (``timings.json``; ISO 8601 UTC), or ``None``.
        claims: claims in ``claims.json``, or ``None`` when it cannot be read.
        tool_calls: ``tool_called`` events in the trace, or ``None`` without a trace.

    """

    run_id: str
    task: str | None = None
    outcome: Literal["passed", "failed"] | None = None
    started_at: str | None = None
    claims: int | None = None
    tool_calls: int | None = None


class RunCreated(RunSummary):
    """A run made by ``POST /v1/runs``.

    Attributes:
        reused: an identical run was already there (same run id) and was kept.
        tool_calls: live tool calls made.
        failures: the report's failing findings, ``[check] file: message``.

    """

    reused: bool
    tool_calls: int
    failures: list[str]


class RunPage(_Closed):
    """A page of runs, sorted by run id.

    Attributes:
        runs: at most ``limit`` runs.
        next_cursor: pass it as ``cursor`` for the next page; ``None`` on the last page.

    """

    runs: list[RunSummary]
    next_cursor: str | None = None


class RunDocuments(_Closed):
    """A run's documents, exactly as stored, and its summary.

    Read in bounded memory and time however big the run: a document that would take
    the answer past the API's response limit (``max_response_bytes``, counted over the
    documents in the order below) is not read; it is ``None`` and named in ``omitted``
    with its size (a recorded session's spec and plan restate every call: about 116 MB
    and 165 MB for a million calls). Read such a document from
    ``GET /v1/runs/{run_id}/files/{name}.json`` and the trace page by page from
    ``GET /v1/runs/{run_id}/trace``.

    Attributes:
        run_id: the run id.
        summary: what the listing shows of the run (``GET /v1/runs/{run_id}/summary``).
        spec: ``spec.json`` (``None`` when missing or omitted).
        plan: ``plan.json``.
        report: ``report.json``.
        claims: ``claims.json``.
        manifest: ``manifest.json``.
        omitted: ``{name: size in bytes}`` of each document left out for its size.

    """

    run_id: str
    summary: RunSummary
    spec: Any = None
    plan: Any = None
    report: Any = None
    claims: Any = None
    manifest: Any = None
    omitted: dict[str, int] = Field(default_factory=dict)


class VerifyFailure(_Closed):
    """One finding that fails verification."""

    check: str
    severity: str
    file: str
    message: str


class VerifyAnswer(_Closed):
    """The result of verifying a run now (the same as ``toolproof verify --json``).

    Attributes:
        run_id: the manifest's run id (``None`` when the manifest is unreadable).
        ok: whether the run verified.
        failures: what fails, manifest first, then the ordered checks.
        report: the recomputed report (``None`` when the manifest check failed).

    """

    run_id: str | None
    ok: bool
    failures: list[VerifyFailure]
    report: dict[str, Any] | None


class ReplayAnswer(_Closed):
    """The result of a frozen replay (the same as ``toolproof replay --json``).

    Attributes:
        run_id: the run id.
        identical: the replayed trace and report are byte-identical to the recorded ones.
        events: events in the replayed trace.
        first_difference: the first differing event and why (``None`` when identical).
        report_matches: the recomputed report equals ``report.json``.
        report_outcome: the replay report's outcome.
        differences: differences let through (none: the API replays strictly).
        live_calls: tool calls made: always 0.

    """

    run_id: str
    identical: bool
    events: int
    first_difference: dict[str, Any] | None
    report_matches: bool
    report_outcome: Literal["passed", "failed"]
    differences: list[str]
    live_calls: int


class Health(_Closed):
    """``GET /v1/health``: the API is up."""

    status: Literal["ok"] = "ok"
    version: str


class Attestations(_Closed):
    """``GET /v1/runs/{run_id}/attestations``: the run's signed statements, as stored.

    Attributes:
        run_id: the run id.
        envelopes: the run's DSSE envelopes (``payload``, ``payloadType``,
            ``signatures``), empty when the run was never attested.
        keys: the signers' public keys stored beside the envelope (key id -> PEM);
            a verifier pins its own keys, these only say who claims to have signed.

    """

    run_id: str
    envelopes: list[dict[str, Any]] = Field(default_factory=list)
    keys: dict[str, str] = Field(default_factory=dict)
