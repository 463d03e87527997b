"""Signed run attestations: an in-toto Statement v1 about a run, in a DSSE envelope.

The statement (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "<run id>", "digest": {"sha256": "<hex of manifest.json>"}}],
     "predicateType": "https://toolproof.dev/attestation/run/v1",
     "predicate": {"plan": "plan_...", "runtime": "runtime_...", "toolset": "toolset_...",
                   "report": "report_...", "lock": "sha256:..." (when the run names a lock),
                   "checks": ["manifest", ...], "policy": "strict", "verdict": "passed"}}

is serialised as canonical JSON (RFC 8785) and signed in a DSSE envelope
(``payloadType`` ``application/vnd.in-toto+json``, :mod:`toolproof.bundle.dsse`).
The statement is a pure function of the run directory, so every signer (a producer,
a reviewer) signs the same bytes and their signatures share one envelope.

Envelopes live *beside* the run, never inside it (the run id is the digest of the
run's content): ``<root>/attestations/<run id>.dsse.json``, and a copy of each
signer's public key in ``<root>/attestations/keys/<key hex>.pub``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolproof.bundle.dsse import (
    PUBLIC_SUFFIX,
    SIGNATURE_BYTES,
    Envelope,
    PublicKey,
    SigningKey,
    load_public_key,
    parse_envelope,
)
from toolproof.bundle.manifest import check_manifest
from toolproof.bundle.rundir import RUNS_DIR
from toolproof.contract.layout import MANIFEST_FILE, PLAN_FILE, REPORT_FILE, RUNTIME_FILE
from toolproof.contract.runs import ExecutionRuntime, Manifest, Plan, Report
from toolproof.errors import IdentityMismatchError, InputError, VerificationError
from toolproof.identity import canonical_json, digest

__all__ = [
    "ATTESTATIONS_DIR",
    "ENVELOPE_SUFFIX",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "AttestResult",
    "AttestationCheck",
    "attest_run",
    "attestation_path",
    "check_attestations",
    "run_predicate",
    "run_statement",
    "stored_public_keys",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://toolproof.dev/attestation/run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
ATTESTATIONS_DIR = "attestations"
ENVELOPE_SUFFIX = ".dsse.json"
_KEYS_DIR = "keys"


def attestation_path(directory: Path) -> Path:
    """Where the envelope of the run in ``directory`` is kept.

    ``<root>/attestations/<run dir name>.dsse.json`` for ``<root>/runs/<run id>``;
    for a run directory elsewhere, ``attestations/`` beside it.
    """
    directory = Path(directory)
    parent = directory.parent
    root = parent.parent if parent.name == RUNS_DIR else parent
    return root / ATTESTATIONS_DIR / (directory.name + ENVELOPE_SUFFIX)


def _read_model(directory: Path, name: str, model: type[Any]) -> Any:
    try:
        return model.model_validate_json((directory / name).read_bytes())
    except (OSError, ValidationError, IdentityMismatchError) as exc:
        raise VerificationError(
            f"{name} of run {directory.name} cannot be read: {type(exc).__name__}", path=name
        ) from None


def run_predicate(directory: Path) -> dict[str, Any]:
    """The predicate of the run in ``directory``, from its stored files.

    Keys: ``plan``, ``runtime``, ``toolset`` and ``report`` (their content ids),
    ``lock`` (the lock digest, only when the run's toolset names one), ``checks`` (the
    check ids in order), ``policy`` and ``verdict`` (``passed`` or ``failed``).

    Raises:
        VerificationError: ``plan.json``, ``runtime.json`` or ``report.json`` cannot be
            read as its model (or its content id does not match).

    """
    plan: Plan = _read_model(directory, PLAN_FILE, Plan)
    runtime: ExecutionRuntime = _read_model(directory, RUNTIME_FILE, ExecutionRuntime)
    report: Report = _read_model(directory, REPORT_FILE, Report)
    predicate: dict[str, Any] = {
        "plan": plan.id,
        "runtime": runtime.id,
        "toolset": runtime.toolset.id,
        "report": report.id,
        "checks": list(report.sequence),
        "policy": report.policy.value,
        "verdict": report.outcome,
    }
    if runtime.toolset.lock is not None:
        predicate["lock"] = runtime.toolset.lock
    return predicate


def _subject(directory: Path) -> tuple[str, str]:
    """The run id and the sha256 hex of ``manifest.json``, after the manifest check."""
    manifest, _, findings = check_manifest(directory)
    if findings or manifest is None:
        first = findings[0]
        raise VerificationError(
            f"run {directory.name} does not pass its manifest check ({first.file}: "
            f"{first.message}); only an intact run can be attested",
            path=first.file,
        )
    return manifest.run_id, digest((directory / MANIFEST_FILE).read_bytes())[7:]


def run_statement(directory: Path) -> dict[str, Any]:
    """The in-toto Statement v1 about the run in ``directory`` (see the module docstring).

    Raises:
        VerificationError: the run fails its manifest check, or a file the predicate
            reads cannot be read.

    """
    run_id, manifest_hex = _subject(directory)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": run_id, "digest": {"sha256": manifest_hex}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": run_predicate(directory),
    }


@dataclass(frozen=True)
class AttestResult:
    """What :func:`attest_run` wrote.

    Attributes:
        path: the envelope file.
        key_id: the signer's key id.
        statement: the signed statement.
        signatures: the key ids that have signed the envelope now, in order.

    """

    path: Path
    key_id: str
    statement: dict[str, Any]
    signatures: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"path", "key_id", "run_id", "signatures", "statement"}``."""
        return {
            "path": str(self.path),
            "key_id": self.key_id,
            "run_id": self.statement["subject"][0]["name"],
            "signatures": list(self.signatures),
            "statement": self.statement,
        }


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _read_envelope(path: Path) -> Envelope:
    try:
        return parse_envelope(json.loads(path.read_bytes()))
    except (ValueError, OSError) as exc:
        raise InputError(
            f"attestation {path} cannot be read as a DSSE envelope: {exc}", path=str(path)
        ) from None


def attest_run(directory: Path, key: SigningKey, *, out: Path | None = None) -> AttestResult:
    """Sign the statement about the run in ``directory`` with ``key``.

    The signature is added to the run's envelope (``out``, or
    :func:`attestation_path`), created if absent; a signature by the same key is
    replaced. The signer's public key is copied beside the default envelope.

    Args:
        directory: the run directory.
        key: the signer's key (:func:`toolproof.bundle.dsse.load_signing_key`).
        out: write the envelope here instead of the default place.

    Raises:
        VerificationError: the run fails its manifest check.
        InputError: the envelope file exists but holds another statement, or is not
            a DSSE envelope (it is never overwritten).

    """
    directory = Path(directory)
    statement = run_statement(directory)
    payload = canonical_json(statement)
    path = Path(out) if out is not None else attestation_path(directory)
    with _locked(path.parent):
        if path.exists():
            envelope = _read_envelope(path)
            if envelope.payload != payload or envelope.payload_type != PAYLOAD_TYPE:
                raise InputError(
                    f"attestation {path} holds a different statement than the one about "
                    f"run {directory.name} now; it is not overwritten (move it aside, or "
                    "pass --out)",
                    path=str(path),
                )
        else:
            envelope = Envelope(payload, PAYLOAD_TYPE)
        envelope = envelope.signed_by(key)
        _write_atomic(path, canonical_json(envelope.to_json()))
        if out is None:
            keys = path.parent / _KEYS_DIR
            keys.mkdir(exist_ok=True)
            _write_atomic(keys / (key.public.key_id[7:] + PUBLIC_SUFFIX), key.public.pem())
    return AttestResult(
        path, key.public.key_id, statement, tuple(item.keyid for item in envelope.signatures)
    )


@dataclass
class AttestationCheck:
    """The outcome of checking a run's attestations.

    Attributes:
        run_id: the run id the manifest names (``None`` when unreadable).
        files: the envelope files read.
        verified: key id -> the envelope files in which that key's signature verified.
        pinned: True when the keys were given by the verifier (``--signer``), False
            when the copies beside the envelope were used (integrity, not identity).
        problems: every reason the attestations are refused, in order.

    """

    run_id: str | None
    files: list[str] = field(default_factory=list)
    verified: dict[str, list[str]] = field(default_factory=dict)
    pinned: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """The check as JSON."""
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "files": self.files,
            "verified": self.verified,
            "pinned": self.pinned,
            "problems": self.problems,
        }


def stored_public_keys(envelope_path: Path) -> list[PublicKey]:
    """The public keys :func:`attest_run` stored beside ``envelope_path``, one per signature.

    They say who *claims* to have signed; a verifier that needs identity pins its own
    keys. Keys that cannot be read, or whose key id is not the one the signature names,
    are left out.

    Raises:
        InputError: the envelope cannot be read.

    """
    envelope = _read_envelope(envelope_path)
    keys = []
    for signature in envelope.signatures:
        candidate = envelope_path.parent / _KEYS_DIR / (signature.keyid[7:] + PUBLIC_SUFFIX)
        if signature.keyid.startswith("sha256:") and candidate.is_file():
            with contextlib.suppress(InputError):
                key = load_public_key(candidate)
                if key.key_id == signature.keyid:
                    keys.append(key)
    return keys


def _statement_problems(
    name: str, payload: bytes, run_id: str, manifest_hex: str, expected: dict[str, Any] | None
) -> list[str]:
    try:
        statement = json.loads(payload)
    except ValueError as exc:
        return [f"{name}: the payload is not JSON ({exc})"]
    if not isinstance(statement, dict):
        return [f"{name}: the statement is not a JSON object"]
    problems = []
    if statement.get("_type") != STATEMENT_TYPE:
        problems.append(f"{name}: _type is {statement.get('_type')!r}, not {STATEMENT_TYPE}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        problems.append(
            f"{name}: predicateType is {statement.get('predicateType')!r}, not {PREDICATE_TYPE}"
        )
    subjects = statement.get("subject")
    subject = subjects[0] if isinstance(subjects, list) and len(subjects) == 1 else None
    if not isinstance(subject, dict):
        problems.append(f"{name}: the statement must have exactly one subject (the run)")
    else:
        named = subject.get("name")
        digests = subject.get("digest")
        sha = digests.get("sha256") if isinstance(digests, dict) else None
        if named != run_id:
            problems.append(
                f"{name}: the statement's subject is {named!r}, not this run {run_id} "
                "(a statement about another run)"
            )
        if sha != manifest_hex:
            problems.append(
                f"{name}: the subject digest sha256:{sha} is not the digest of this run's "
                f"manifest.json (sha256:{manifest_hex})"
            )
    predicate = statement.get("predicate")
    if expected is not None and isinstance(predicate, dict):
        for key in sorted(set(expected) | set(predicate)):
            if predicate.get(key) != expected.get(key):
                problems.append(
                    f"{name}: predicate {key} is {predicate.get(key)!r}, the run has "
                    f"{expected.get(key)!r}"
                )
    elif expected is not None:
        problems.append(f"{name}: the predicate is not a JSON object")
    return problems


def _signature_problems(
    name: str, envelope: Envelope, trusted: Sequence[PublicKey], check: AttestationCheck
) -> list[str]:
    problems = []
    message = envelope.signed_bytes()
    for key in trusted:
        hinted = [item for item in envelope.signatures if item.keyid == key.key_id]
        if any(
            len(item.sig) == SIGNATURE_BYTES and key.verify(item.sig, message)
            for item in (*hinted, *envelope.signatures)
        ):
            check.verified.setdefault(key.key_id, []).append(name)
            continue
        if hinted and all(len(item.sig) != SIGNATURE_BYTES for item in hinted):
            size = len(hinted[0].sig)
            problems.append(
                f"{name}: the signature by {key.key_id} is {size} bytes, an Ed25519 "
                f"signature is {SIGNATURE_BYTES} (truncated or padded)"
            )
        elif hinted:
            problems.append(
                f"{name}: the signature by {key.key_id} does not verify (the envelope or "
                "its statement was altered after signing)"
            )
    return problems


def check_attestations(
    directory: Path,
    *,
    signers: Sequence[PublicKey] = (),
    files: Sequence[Path] = (),
    require: bool = False,
) -> AttestationCheck:
    """Check the attestations of the run in ``directory``.

    Each envelope must be a DSSE envelope of ``application/vnd.in-toto+json``; its
    statement's subject must be this run (name = run id, digest = sha256 of
    ``manifest.json``) and its predicate must equal :func:`run_predicate` of the run.
    Every key in ``signers`` must have a valid signature in some envelope; with
    ``require`` at least one valid signature is needed (checked against the copies
    of the signers' keys beside the envelope when no ``signers`` are given).

    Args:
        directory: the run directory.
        signers: the public keys that must have signed (producer, reviewer...).
        files: the envelopes to read; default the run's :func:`attestation_path`.
        require: refuse a run without a valid signature.

    Returns:
        The :class:`AttestationCheck`; ``problems`` names every refusal's reason.

    """
    directory = Path(directory)
    check = AttestationCheck(run_id=None, pinned=bool(signers))
    raw = (directory / MANIFEST_FILE).read_bytes() if (directory / MANIFEST_FILE).is_file() else b""
    try:
        run_id = Manifest.model_validate_json(raw).run_id
    except ValidationError:
        check.problems.append(f"run {directory.name}: manifest.json cannot be read")
        return check
    check.run_id = run_id
    manifest_hex = digest(raw)[7:]
    try:
        expected: dict[str, Any] | None = run_predicate(directory)
    except VerificationError as exc:
        check.problems.append(exc.message)
        expected = None
    paths = list(files) or [attestation_path(directory)]
    present = [path for path in paths if path.is_file()]
    if not present:
        if signers or require:
            where = ", ".join(str(path) for path in paths)
            check.problems.append(f"run {run_id} has no attestation (looked for {where})")
        return check
    signed: set[str] = set()
    for path in present:
        name = str(path)
        check.files.append(name)
        try:
            envelope = parse_envelope(json.loads(path.read_bytes()))
        except ValueError as exc:
            check.problems.append(f"{name}: not a DSSE envelope: {exc}")
            continue
        signed.update(item.keyid for item in envelope.signatures)
        if envelope.payload_type != PAYLOAD_TYPE:
            check.problems.append(
                f"{name}: payloadType is {envelope.payload_type!r}, not {PAYLOAD_TYPE}"
            )
        trusted = list(signers) or stored_public_keys(path)
        check.problems += _signature_problems(name, envelope, trusted, check)
        check.problems += _statement_problems(
            name, envelope.payload, run_id, manifest_hex, expected
        )
    for key in signers:
        if key.key_id not in check.verified and not any(key.key_id in p for p in check.problems):
            others = ", ".join(sorted(signed)) or "nobody"
            check.problems.append(
                f"no valid signature by {key.key_id} ({key.path or 'key'}) on run {run_id} "
                f"(signed by: {others})"
            )
    if require and not check.verified and not check.problems:
        check.problems.append(f"run {run_id} has no valid signature")
    return check
