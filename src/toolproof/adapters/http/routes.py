"""The endpoints of the runs HTTP API (``/v1``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi import Path as PathParam

from toolproof.adapters.http import gateway
from toolproof.adapters.http.guards import RunId, require_token, run_directory, settings_of
from toolproof.adapters.http.models import (
    Attestations,
    CreateRun,
    Health,
    ReplayAnswer,
    RunCreated,
    RunDocuments,
    RunPage,
    RunSummary,
    VerifyAnswer,
)
from toolproof.adapters.http.problems import ApiProblem, Problem
from toolproof.adapters.http.settings import ApiSettings
from toolproof.bundle.attest import attestation_path, stored_public_keys
from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.paths import confine, path_problem
from toolproof.bundle.tracepages import TraceCursor, TraceLocator, read_page
from toolproof.contract.layout import CLAIMS_FILE, REPORT_FILE, SPEC_FILE, TIMINGS_FILE, TRACE_FILE
from toolproof.errors import InputError
from toolproof.runs.diff import diff_runs
from toolproof.runs.listing import count_tool_calls, spec_task
from toolproof.version import __version__

__all__ = ["public", "router"]

_RUN_ID = re.compile(r"^run_[0-9a-f]{64}$")
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or wrong bearer token."},
    413: {"model": Problem, "description": "The request body is too large."},
    422: {"model": Problem, "description": "Invalid request (run id, parameters, body)."},
}
_RUN_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    404: {"model": Problem, "description": "No such run."},
}
_DOCUMENTS = ("spec", "plan", "report", "claims", "manifest")
_LOCATOR = TraceLocator()
"""Where each trace's events start, found once per served trace (``?start=``)."""

public = APIRouter(prefix="/v1")
router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
Settings = Annotated[ApiSettings, Depends(settings_of)]


@public.get("/health", tags=["meta"])
def health() -> Health:
    """Whether the API is up (no token needed)."""
    return Health(version=__version__)


def _read_json(path: Path, budget: int) -> tuple[Any, int]:
    if path.is_symlink() or not path.is_file():
        return None, 0
    size = path.stat().st_size
    if size > budget:
        raise ApiProblem(
            422,
            "response-too-large",
            f"{path.name} is {size} bytes, over the API's response limit; "
            "read the run directory directly",
            path=path.name,
        )
    try:
        return json.loads(path.read_bytes()), size
    except (ValueError, OSError):
        return None, size


def _summary(settings: ApiSettings, run_id: str) -> RunSummary:
    """What a listing shows of one run, read in bounded memory and time.

    The task is read from ``spec.json``'s tail when it is big (a recorded session's spec
    restates every call), the calls are counted in one pass over the trace, remembered
    (:func:`toolproof.runs.listing.count_tool_calls`); the small documents (report,
    timings, claims) are read whole, up to the response limit (``None`` past it).
    """
    directory = settings.root / "runs" / run_id
    budget = settings.max_response_bytes
    report, timings, claims = (
        _small_json(directory / name, budget) for name in (REPORT_FILE, TIMINGS_FILE, CLAIMS_FILE)
    )
    outcome = report.get("outcome") if isinstance(report, dict) else None
    started = timings.get("started_at") if isinstance(timings, dict) else None
    trace = directory / TRACE_FILE
    calls = None if trace.is_symlink() else count_tool_calls(trace)
    return RunSummary(
        run_id=run_id,
        task=spec_task(directory / SPEC_FILE),
        outcome=outcome if outcome in ("passed", "failed") else None,
        started_at=started if isinstance(started, str) else None,
        claims=len(claims) if isinstance(claims, list) else None,
        tool_calls=calls,
    )


def _small_json(path: Path, budget: int) -> Any:
    """``path``'s JSON, or ``None`` when unreadable or over ``budget`` bytes."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > budget:
        return None
    try:
        return json.loads(path.read_bytes())
    except (ValueError, OSError):
        return None


@router.get("/runs", tags=["runs"], responses=_ERRORS)
def list_runs(
    settings: Settings,
    limit: Annotated[int, Query(ge=1, le=1000, description="Runs per page.")] = 50,
    cursor: Annotated[
        str | None,
        Query(pattern=r"^run_[0-9a-f]{64}$", description="`next_cursor` of the previous page."),
    ] = None,
) -> RunPage:
    """List the runs under the artifact root, sorted by run id, a page at a time.

    A ``runs`` folder that resolves outside the root (a symlink) lists nothing.
    """
    try:
        runs_dir = confine(settings.root, "runs", what="runs folder")
    except InputError:
        return RunPage(runs=[], next_cursor=None)
    names = sorted(
        entry.name
        for entry in (runs_dir.iterdir() if runs_dir.is_dir() else ())
        if _RUN_ID.match(entry.name) and entry.is_dir() and not entry.is_symlink()
    )
    if cursor is not None:
        names = [name for name in names if name > cursor]
    size = min(limit, settings.max_page)
    page = names[:size]
    return RunPage(
        runs=[_summary(settings, name) for name in page],
        next_cursor=page[-1] if len(names) > size else None,
    )


@router.post(
    "/runs",
    tags=["runs"],
    status_code=201,
    responses={**_ERRORS, 400: {"model": Problem, "description": "The body is not JSON."}},
)
async def create_run(body: CreateRun, settings: Settings) -> RunCreated:
    """Plan, execute and verify a spec; answer the run (201), reused if identical work exists.

    The spec's ``toolset`` (its ``toolproof.toml``) is a relative path inside the
    artifact root. A report that fails is still a created run: see ``outcome``.
    """
    outcome = await gateway.create_run(settings, body.spec.to_json())
    return RunCreated(
        run_id=outcome.run_id,
        task=body.spec.task,
        outcome=outcome.report.outcome,
        reused=outcome.reused,
        tool_calls=outcome.live_calls,
        failures=[f"[{r.check}] {f.file}: {f.message}" for r, f in outcome.report.failing()],
    )


@router.get("/runs/{run_id}", tags=["runs"], responses=_RUN_ERRORS)
def get_run(run_id: RunId, settings: Settings) -> RunDocuments:
    """A run's summary and its spec, plan, report, claims and manifest, exactly as stored.

    A document that would take the answer past the response limit is not read: it is
    ``null`` and named in ``omitted`` with its size (bounded memory and time however big
    the run; the trace is paged by ``GET /v1/runs/{run_id}/trace``).
    """
    directory = run_directory(settings, run_id)
    budget = settings.max_response_bytes
    documents: dict[str, Any] = {}
    omitted: dict[str, int] = {}
    for name in _DOCUMENTS:
        path = directory / f"{name}.json"
        size = 0 if path.is_symlink() or not path.is_file() else path.stat().st_size
        if size > budget:
            omitted[name] = size
            continue
        documents[name], used = _read_json(path, budget)
        budget -= used
    summary = _summary(settings, run_id)
    return RunDocuments(run_id=run_id, summary=summary, omitted=omitted, **documents)


@router.get("/runs/{run_id}/summary", tags=["runs"], responses=_RUN_ERRORS)
def get_summary(run_id: RunId, settings: Settings) -> RunSummary:
    """What the listing shows of one run (task, outcome, start, claims, tool calls).

    Read in bounded memory and time whatever the run's size (the viewer's run page
    heads itself with it instead of reading ``spec.json``); not verified.
    """
    run_directory(settings, run_id)
    return _summary(settings, run_id)


@router.get(
    "/runs/{run_id}/trace",
    tags=["runs"],
    response_class=Response,
    responses={
        **_RUN_ERRORS,
        200: {
            "description": "Trace events as NDJSON (one canonical JSON event per line). "
            "When more events follow, header `X-Next-Cursor` is the next page's `cursor` "
            "and `X-Next-Start` its first event.",
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
        },
    },
)
def get_trace(
    run_id: RunId,
    settings: Settings,
    start: Annotated[
        int | None, Query(ge=0, le=2**62, description="First event index (default 0).")
    ] = None,
    cursor: Annotated[
        str | None,
        Query(
            max_length=40,
            description="`X-Next-Cursor` of the previous page (`POSITION@OFFSET`); "
            "not with `start`.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=100_000, description="Events per page.")] = 1000,
) -> Response:
    """A page of the run's trace (``trace.jsonl``) from event ``start`` or ``cursor``, as NDJSON.

    A page holds at most ``limit`` events and the API's response limit in bytes, and is
    read from the trace without reading the rest of it (:mod:`toolproof.bundle.tracepages`):
    from a ``cursor``, the page's own bytes; from a ``start``, the first time, one pass
    over the trace up to that event counting newlines (remembered for the next). An
    event larger than the limit by itself is a 422 ``response-too-large`` naming the
    event, its size and the limit (a page never comes back empty with more to come).
    A malformed cursor, one that is not the start of an event, or ``start`` with
    ``cursor`` is a 422 ``invalid-request``.
    """
    path = run_directory(settings, run_id) / TRACE_FILE
    if cursor is not None and start is not None:
        raise ApiProblem(
            422, "invalid-request", "give start or cursor, not both", parameter="cursor"
        )
    if not path.is_file() or path.is_symlink():
        return Response(b"", media_type="application/x-ndjson")
    budget = settings.max_response_bytes
    try:
        if cursor is not None:
            first: TraceCursor | None = TraceCursor.parse(cursor)
        else:
            first = _LOCATOR.cursor_at(path, start or 0)
        page = read_page(path, first, limit=limit, max_bytes=budget) if first else None
    except InputError as exc:
        raise ApiProblem(
            422, "invalid-request", exc.message, parameter="cursor", rule="trace cursor"
        ) from None
    if page is None:
        return Response(b"", media_type="application/x-ndjson")
    if page.oversized is not None:
        # a page must move on: an event that can never fit is refused, naming it
        index, size = page.oversized.position, page.oversized.size
        raise ApiProblem(
            422,
            "response-too-large",
            f"trace event {index} is {size} bytes, over the API's response "
            f"limit of {budget} bytes; read trace.jsonl from the run directory",
            event=index,
            size=size,
            limit=budget,
            next_cursor=str(page.next) if page.next else None,
        )
    headers = {}
    if page.next is not None:
        headers = {"X-Next-Cursor": str(page.next), "X-Next-Start": str(page.next.position)}
    return Response(b"".join(page.lines), media_type="application/x-ndjson", headers=headers)


@router.get("/runs/{run_id}/attestations", tags=["runs"], responses=_RUN_ERRORS)
def get_attestations(run_id: RunId, settings: Settings) -> Attestations:
    """The run's DSSE envelopes (in-toto statements) and the signers' stored public keys.

    Verify them offline with ``toolproof verify RUN --signer KEY.pub`` or any DSSE
    tooling (see ``docs/attestations.md``); the server does not vouch for them.
    """
    directory = run_directory(settings, run_id)
    path = attestation_path(directory)
    envelope, _ = _read_json(path, settings.max_response_bytes)
    if not isinstance(envelope, dict):
        return Attestations(run_id=run_id)
    try:
        keys = {key.key_id: key.pem().decode("ascii") for key in stored_public_keys(path)}
    except InputError:
        keys = {}  # not a DSSE envelope: served as stored, a verifier refuses it
    return Attestations(run_id=run_id, envelopes=[envelope], keys=keys)


@router.get("/diff", tags=["runs"], responses=_RUN_ERRORS)
def diff(
    a: Annotated[str, Query(pattern=r"^run_[0-9a-f]{64}$", description="The first run.")],
    b: Annotated[str, Query(pattern=r"^run_[0-9a-f]{64}$", description="The second run.")],
    settings: Settings,
) -> dict[str, Any]:
    """What ``toolproof diff A B`` computes: files that differ and the first differing event."""
    first, second = run_directory(settings, a), run_directory(settings, b)
    return diff_runs(first, second).to_json()


@router.post("/runs/{run_id}/verify", tags=["runs"], responses=_RUN_ERRORS)
async def verify_run(run_id: RunId, settings: Settings) -> VerifyAnswer:
    """Verify the run now (manifest, trace chain, evidence, claims); answer the report."""
    directory = run_directory(settings, run_id)
    verification = await gateway.verify_run(settings, directory)
    return VerifyAnswer.model_validate(verification.to_json())


@router.post(
    "/runs/{run_id}/replay",
    tags=["runs"],
    responses={
        **_RUN_ERRORS,
        409: {"model": Problem, "description": "Replay refused (tampered or changed run)."},
    },
)
async def replay_run(run_id: RunId, settings: Settings) -> ReplayAnswer:
    """Replay the run frozen (recorded results only, no live call); refused runs answer 409."""
    directory = run_directory(settings, run_id)
    return ReplayAnswer.model_validate(await gateway.replay_run(settings, directory))


@router.get(
    "/runs/{run_id}/files/{path:path}",
    tags=["runs"],
    response_class=Response,
    responses={
        **_RUN_ERRORS,
        200: {
            "description": "The file's exact bytes (evidence, trace, any manifested file).",
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        },
    },
)
def get_file(
    run_id: RunId,
    path: Annotated[str, PathParam(description="Relative POSIX path inside the run.")],
    settings: Settings,
) -> Response:
    """One file of a run directory, or one evidence item (``evidence/<hex>``), confined to the run.

    An evidence item is served by its name in every layout (a packed run's item is read
    from ``evidence.pack`` through its index, its digest checked).
    """
    directory = run_directory(settings, run_id)
    problem = path_problem(path)
    if problem is not None:
        raise ApiProblem(422, "invalid-path", f"path {path!r} {problem}", path=path, rule=problem)
    key = RunEvidence.key_of_path(path)
    if key is not None:
        return _evidence_item(RunEvidence.open(directory), key, path, run_id, settings)
    try:
        file = confine(directory, path, what="file")
    except InputError:
        raise ApiProblem(404, "file-not-found", f"no file {path!r} in run {run_id}") from None
    if not file.is_file():
        raise ApiProblem(404, "file-not-found", f"no file {path!r} in run {run_id}")
    _check_size(path, file.stat().st_size, settings)
    return Response(file.read_bytes(), media_type="application/octet-stream")


def _evidence_item(
    evidence: RunEvidence, key: str, path: str, run_id: str, settings: ApiSettings
) -> Response:
    """The bytes of one evidence item, whatever the run's layout.

    Raises:
        ApiProblem: 404 when the run holds no such item, 422 when it is over the limit.
        VerificationError: the run's pack or index is damaged there (409).

    """
    if key not in evidence:
        raise ApiProblem(404, "file-not-found", f"no file {path!r} in run {run_id}")
    _check_size(path, evidence.size(key), settings)
    return Response(evidence.read(key), media_type="application/octet-stream")


def _check_size(path: str, size: int, settings: ApiSettings) -> None:
    """Refuse to answer with the ``size`` bytes of ``path`` when over the API's limit.

    Raises:
        ApiProblem: 422 ``response-too-large`` when ``size`` is over
            ``settings.max_response_bytes``.

    """
    if size > settings.max_response_bytes:
        raise ApiProblem(
            422,
            "response-too-large",
            f"{path} is {size} bytes, over the API's response limit of "
            f"{settings.max_response_bytes} bytes",
            path=path,
        )
