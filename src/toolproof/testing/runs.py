"""Conformance of a run an extension took part in: verification, coverage, replay.

Every assertion raises :class:`~toolproof.testing.errors.ConformanceError` whose
rule is the broken invariant (``INV-...``, from the check that found it) or a kit
rule (``kit:...``).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from toolproof.bundle.evidence import RunEvidence
from toolproof.contract.evidence import ClaimStatus
from toolproof.contract.layout import MANIFEST_FILE, TRACE_FILE
from toolproof.contract.runs import Manifest
from toolproof.contract.tools import ToolsetDescriptor
from toolproof.errors import ReplayRefused
from toolproof.identity import digest, digest_of_hex
from toolproof.runs.registries import RunRegistries
from toolproof.runs.replay import ReplayResult, replay_run
from toolproof.testing.errors import ConformanceError
from toolproof.verify.verifier import OUTER_CHECKS, verify_run
from toolproof.verify.view import RunView

__all__ = [
    "assert_frozen_replay",
    "assert_manifest_covers",
    "assert_replay_refuses",
    "assert_run_conforms",
    "assert_supports_exact",
]

_OUTER = {check: invariant for check, invariant, _ in OUTER_CHECKS}


def assert_run_conforms(run_dir: Path, *, registries: RunRegistries | None = None) -> None:
    """Verify ``run_dir`` and check manifest coverage and every support byte for byte.

    Args:
        run_dir: the run directory.
        registries: where the spec's additional checks resolve (default: the installed
            entry points); pass the run's when it used checks registered in code.

    Raises:
        ConformanceError: the first failure; its rule is the invariant of the check that
            found it (``INV-DERIVED-GROUNDED``, ``INV-FAILURE-HONEST``...).

    """
    run_dir = Path(run_dir)
    checks = registries.checks if registries is not None else None
    verification = verify_run(run_dir, checks=checks)
    if not verification.ok:
        invariants = dict(_OUTER)
        if verification.report is not None:
            invariants.update({r.check: r.invariant for r in verification.report.results})
        first = verification.failures[0]
        rest = len(verification.failures) - 1
        more = f" (and {rest} more)" if rest else ""
        raise ConformanceError(invariants.get(first.check, first.check), f"{first}{more}")
    assert_manifest_covers(run_dir)
    assert_supports_exact(run_dir)


def assert_manifest_covers(run_dir: Path) -> None:
    """Every file of ``run_dir`` is in its manifest with its size and digest, and nothing else.

    Raises:
        ConformanceError: ``kit:manifest-coverage``.

    """
    run_dir = Path(run_dir)
    manifest = Manifest.model_validate_json((run_dir / MANIFEST_FILE).read_bytes())
    listed = {entry.path: entry for entry in manifest.files}
    on_disk = {
        path.relative_to(run_dir).as_posix()
        for path in run_dir.rglob("*")
        if path.is_file() or path.is_symlink()
    } - {MANIFEST_FILE}
    if on_disk != set(listed):
        extra, missing = sorted(on_disk - set(listed)), sorted(set(listed) - on_disk)
        raise ConformanceError(
            "kit:manifest-coverage",
            f"{run_dir.name}: unlisted {extra}, listed but missing {missing}",
        )
    for rel, entry in sorted(listed.items()):
        data = (run_dir / rel).read_bytes()
        actual = digest(data)
        if (len(data), actual) != (entry.size, entry.digest):
            raise ConformanceError(
                "kit:manifest-coverage", f"{rel}: size/digest differ from the manifest"
            )


def assert_supports_exact(run_dir: Path) -> int:
    """Every support of every validated claim hashes to its digest; citations equal the bytes.

    Returns:
        The number of supports checked.

    Raises:
        ConformanceError: ``INV-SUPPORT-SPAN`` (bytes) or ``INV-DERIVED-GROUNDED``
            (a citation's text, or a validated claim without supports).

    """
    view = RunView(Path(run_dir))
    claims = view.claims or []
    checked = 0
    for number, claim in enumerate(claims):
        if claim.status != ClaimStatus.VALIDATED:
            continue
        if not claim.supports:
            raise ConformanceError(
                "INV-DERIVED-GROUNDED", f"claim {number} is validated without supports"
            )
        for support in claim.supports:
            rel = view.evidence.path_of(support.evidence)
            data = view.evidence.read(support.evidence, support.start, support.end)
            if digest(data) != support.sha256:
                raise ConformanceError(
                    "INV-SUPPORT-SPAN",
                    f"claim {number}: bytes [{support.start}, {support.end}) of {rel} do not "
                    "hash to the support's sha256",
                )
            checked += 1
        for citation in claim.citations:
            support = claim.supports[citation.support]
            data = view.evidence.read(support.evidence, support.start, support.end)
            if citation.text.encode("utf-8") != data:
                raise ConformanceError(
                    "INV-DERIVED-GROUNDED",
                    f"claim {number}: citation {citation.text!r} is not the exact support bytes",
                )
    return checked


def assert_frozen_replay(run_dir: Path, *, registries: RunRegistries | None = None) -> ReplayResult:
    """Replay ``run_dir`` frozen: identical trace and report, no live call.

    Args:
        run_dir: the run directory.
        registries: where the recorded reasoner and checks resolve (default:
            ``RunRegistries()``); pass the run's when it used plugins registered in code.

    Raises:
        ConformanceError: ``kit:frozen-replay`` (refused, different, or a live call).

    """
    try:
        result = asyncio.run(replay_run(Path(run_dir), registries=registries))
    except ReplayRefused as exc:
        raise ConformanceError("kit:frozen-replay", exc.message) from None
    if result.live_calls:
        raise ConformanceError(
            "kit:frozen-replay", f"the replay made {result.live_calls} live calls"
        )
    if not result.identical:
        why = result.first_difference["why"] if result.first_difference else "report differs"
        raise ConformanceError(
            "kit:frozen-replay",
            f"the replay differs from the record: {why}; a non-deterministic provider must be "
            "reached through a recorded call (request.call_tool), never directly",
        )
    return result


def _expect_refusal(run_dir: Path, what: str, descriptor: ToolsetDescriptor | None) -> None:
    try:
        asyncio.run(replay_run(run_dir, toolset=descriptor))
    except ReplayRefused:
        return
    raise ConformanceError(
        "kit:strict-refusal", f"frozen replay accepted a run with {what}; it must refuse"
    )


def assert_replay_refuses(run_dir: Path) -> None:
    """Strict replay refuses when equivalence cannot be established.

    Tries, on scratch copies: one flipped byte in an evidence file (or the trace), and a
    changed runtime descriptor (one tool's fingerprint changed).

    Raises:
        ConformanceError: ``kit:strict-refusal``.

    """
    run_dir = Path(run_dir)
    with tempfile.TemporaryDirectory(prefix="toolproof-kit-") as tmp:
        copy = Path(tmp) / "runs" / run_dir.name
        shutil.copytree(run_dir, copy)
        target = next(RunEvidence.open(copy).stored_files(), TRACE_FILE)
        data = bytearray((copy / target).read_bytes())
        data[0] ^= 0x01
        (copy / target).write_bytes(bytes(data))
        _expect_refusal(copy, f"a flipped byte in {target}", None)
        shutil.rmtree(copy)
        shutil.copytree(run_dir, copy)
        runtime = RunView(copy).runtime
        if runtime is not None and runtime.toolset.tools:
            tools = list(runtime.toolset.tools)
            tools[0] = tools[0].model_copy(update={"fingerprint": digest_of_hex("0" * 64)})
            changed = ToolsetDescriptor.model_validate(
                {**runtime.toolset.to_json(), "tools": [t.to_json() for t in tools], "id": ""}
            )
            _expect_refusal(copy, f"tool {tools[0].name!r} changed", changed)
