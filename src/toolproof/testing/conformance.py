"""One call per seam: does a reasoner, check or retriever meet its obligations.

* :func:`assert_reasoner_conforms` runs a spec with the reasoner live, then checks
  the run (verification, manifest coverage, exact supports, call/result linkage),
  frozen replay (identical, no live call), strict refusal, the descriptor's
  stability across processes, and, given a spec whose evidence is missing, that
  the reasoner reports ``insufficient_evidence`` rather than validating.
* :func:`assert_check_conforms` builds the check (by name, as a spec would), checks
  its identity across processes, that it is deterministic, silent on a sound run,
  and that it finds the fault in a broken one.
* :func:`assert_retrieval_conforms` checks a retriever's fingerprint and
  that the same query gives the same hits.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolproof.contract.evidence import ClaimStatus
from toolproof.contract.runs import CheckSpec, RunSpec
from toolproof.errors import InputError
from toolproof.evidence.builtin_reasoners import reasoner_registry
from toolproof.identity import canonical_json
from toolproof.runs.run import RunOutcome, execute_run
from toolproof.testing.errors import ConformanceError
from toolproof.testing.identity import assert_identity_stable
from toolproof.testing.runs import (
    assert_frozen_replay,
    assert_manifest_covers,
    assert_replay_refuses,
    assert_run_conforms,
    assert_supports_exact,
)
from toolproof.tools.toolset import Toolset
from toolproof.verify.sequence import CHECK_ID_RE, CheckRegistry, check_for
from toolproof.verify.view import RunView

__all__ = ["assert_check_conforms", "assert_reasoner_conforms", "assert_retrieval_conforms"]


def _run(spec: RunSpec, toolset: Toolset, root: Path) -> RunOutcome:
    try:
        return asyncio.run(execute_run(spec, root=root, toolset=toolset))
    except InputError as exc:
        raise ConformanceError("kit:run-starts", exc.message) from None


def assert_reasoner_conforms(
    spec: RunSpec | dict[str, Any],
    toolset: Toolset,
    root: Path,
    *,
    insufficient: RunSpec | dict[str, Any] | None = None,
) -> RunOutcome:
    """Run ``spec`` (whose ``[reasoner]`` is the reasoner under test) and check it all.

    Args:
        spec: a spec naming the reasoner; its evidence should support some claims.
        toolset: the sealed Toolset the spec's steps call.
        root: an artifact root (``tmp_path``).
        insufficient: a spec with the same reasoner whose evidence is missing (failing
            steps): none of the reasoner's claims may be ``validated``.

    Returns:
        The live run.

    Raises:
        ConformanceError: the first rule broken (``INV-...`` from a check, or
            ``kit:validates-something``, ``kit:frozen-replay``, ``kit:strict-refusal``,
            ``kit:descriptor-stable``, ``kit:insufficient-evidence``).

    """
    model = spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)
    assert_identity_stable({"reasoner": model.reasoner.to_json()})
    label = reasoner_registry().create(model.reasoner).label
    outcome = _run(model, toolset, root)
    assert_run_conforms(outcome.path)
    own = [claim for claim in outcome.outcome.claims if claim.reasoner == label]
    if not any(claim.status == ClaimStatus.VALIDATED for claim in own):
        raise ConformanceError(
            "kit:validates-something",
            f"reasoner {label} validated no claim on evidence meant to support one",
        )
    assert_frozen_replay(outcome.path)
    assert_replay_refuses(outcome.path)
    if insufficient is not None:
        weak = (
            insufficient
            if isinstance(insufficient, RunSpec)
            else RunSpec.model_validate(insufficient)
        )
        thin = _run(weak, toolset, root)
        for claim in thin.outcome.claims:
            if claim.reasoner == label and claim.status == ClaimStatus.VALIDATED:
                raise ConformanceError(
                    "kit:insufficient-evidence",
                    f"reasoner {label} validated {claim.statement!r} although the evidence it "
                    "needs is missing; report insufficient_evidence instead",
                )
        assert_manifest_covers(thin.path)
        assert_supports_exact(thin.path)
    return outcome


def assert_check_conforms(
    check: CheckSpec | dict[str, Any] | str,
    sound_run: Path,
    broken_run: Path | None = None,
) -> None:
    """Build an additional check by name and check its obligations.

    Args:
        check: the check as a spec names it (a name, or ``{name, params}``).
        sound_run: a run directory the check must pass (no findings).
        broken_run: a run directory with the fault the check exists to find.

    Raises:
        ConformanceError: ``kit:check-builds``, ``kit:descriptor-stable``,
            ``kit:check-deterministic``, ``kit:check-silent-on-sound-run``,
            ``kit:check-raises``, ``kit:check-finds`` or ``kit:actionable-message``.

    """
    spec = CheckSpec(name=check) if isinstance(check, str) else CheckSpec.model_validate(check)
    try:
        built, descriptor = check_for(spec, CheckRegistry())
    except InputError as exc:
        raise ConformanceError("kit:check-builds", exc.message) from None
    if CHECK_ID_RE.match(built.id) is None or not built.invariant.startswith("INV-"):
        raise ConformanceError(
            "kit:check-builds", f"check {built.id!r}: invariant ids start with 'INV-'"
        )
    assert_identity_stable({"check": spec.to_json()})
    first, second = built.run(RunView(Path(sound_run))), built.run(RunView(Path(sound_run)))
    shown = [canonical_json(f.to_json()) for f in first or []]
    if shown != [canonical_json(f.to_json()) for f in second or []]:
        raise ConformanceError(
            "kit:check-deterministic",
            f"check {built.id!r} found different things in two runs over the same directory",
        )
    for item in first or []:
        rule = "kit:check-raises" if item.detail.get("rule") else "kit:check-silent-on-sound-run"
        raise ConformanceError(rule, f"check {built.id!r} on a sound run: {item.message}")
    if broken_run is not None:
        found = built.run(RunView(Path(broken_run))) or []
        if not found:
            raise ConformanceError(
                "kit:check-finds", f"check {built.id!r} found nothing in {Path(broken_run).name}"
            )
        for item in found:
            if item.detail.get("rule"):
                raise ConformanceError("kit:check-raises", item.message)
            if len(item.message) < 10:
                raise ConformanceError(
                    "kit:actionable-message",
                    f"check {built.id!r}: finding message {item.message!r} says too little",
                )
    del descriptor


def assert_retrieval_conforms(retriever: Any, query: str) -> None:
    """A retriever has a stable identity and answers a query deterministically.

    Args:
        retriever: an object meeting :class:`~toolproof.sources.retrieval.seam.Retriever`.
        query: a query with hits in its corpus.

    Raises:
        ConformanceError: ``kit:retrieval-identity`` or ``kit:retrieval-deterministic``.

    """
    from toolproof.sources.retrieval.seam import Retriever

    if not isinstance(retriever, Retriever):
        raise ConformanceError(
            "kit:retrieval-identity",
            f"{type(retriever).__name__} lacks kind/name/version/fingerprint/descriptor/as_tool",
        )
    descriptor = retriever.descriptor()
    if descriptor.get("fingerprint") != retriever.fingerprint or not str(
        retriever.fingerprint
    ).startswith("sha256:"):
        raise ConformanceError(
            "kit:retrieval-identity", "descriptor()['fingerprint'] must be the sha256 fingerprint"
        )
    tool = retriever.as_tool("retrieve")
    if retriever.fingerprint not in tool.descriptor().source:
        raise ConformanceError(
            "kit:retrieval-identity",
            "the bound tool's source must carry the fingerprint, so a changed corpus or "
            "configuration changes the runtime descriptor",
        )
    first = asyncio.run(tool.call({"query": query}))
    second = asyncio.run(tool.call({"query": query}))
    if not first.ok or first != second:
        raise ConformanceError(
            "kit:retrieval-deterministic", f"query {query!r} gave different or failed results"
        )
