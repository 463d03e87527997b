"""Signed run attestations: keys, DSSE signing, the statement, and every refusal's reason."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from runs_support import Counter, base_spec, make_toolset, remanifest, run, run_files

from toolproof.bundle.attest import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    attest_run,
    attestation_path,
    check_attestations,
    run_statement,
)
from toolproof.bundle.dsse import (
    Envelope,
    PublicKey,
    SigningKey,
    generate_key,
    load_public_key,
    load_signing_key,
    pae,
    parse_envelope,
)
from toolproof.bundle.manifest import check_manifest
from toolproof.contract.runs import ExecutionRuntime, Plan, Report
from toolproof.errors import InputError, VerificationError
from toolproof.identity import canonical_json, digest


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return run(tmp_path / "root", base_spec(), make_toolset(Counter())).path


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, SigningKey]:
    (tmp_path / "keys").mkdir()
    return {name: generate_key(tmp_path / "keys" / name) for name in ("producer", "reviewer")}


def _envelope(run_dir: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(attestation_path(run_dir).read_bytes())
    return document


def _write_envelope(run_dir: Path, document: dict[str, Any]) -> None:
    attestation_path(run_dir).write_bytes(json.dumps(document).encode())


def _problems(run_dir: Path, *signers: SigningKey, **kw: Any) -> list[str]:
    check = check_attestations(run_dir, signers=[key.public for key in signers], **kw)
    return check.problems


# -- keys ------------------------------------------------------------------------------------


def test_keygen_writes_an_owner_only_private_key_and_its_public_key_beside(tmp_path: Path) -> None:
    key = generate_key(tmp_path / "signer")
    assert stat.S_IMODE((tmp_path / "signer").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "signer.pub").stat().st_mode) == 0o644
    raw = key.public.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert key.public.key_id == digest(raw)
    assert load_signing_key(tmp_path / "signer").public.key_id == key.public.key_id
    assert load_public_key(tmp_path / "signer.pub").key_id == key.public.key_id


def test_keygen_never_overwrites_a_key(tmp_path: Path) -> None:
    generate_key(tmp_path / "signer")
    with pytest.raises(InputError, match=r"signer exists already: not overwritten"):
        generate_key(tmp_path / "signer")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620], ids=oct)
def test_a_private_key_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    generate_key(tmp_path / "signer")
    os.chmod(tmp_path / "signer", mode)
    with pytest.raises(InputError) as caught:
        load_signing_key(tmp_path / "signer")
    assert caught.value.message == (
        f"key file {tmp_path / 'signer'} has mode {mode:04o}: a private key must be readable "
        "by its owner only (chmod 600)"
    )


def test_an_owner_only_read_only_private_key_is_accepted(tmp_path: Path) -> None:
    key = generate_key(tmp_path / "signer")
    os.chmod(tmp_path / "signer", 0o400)
    assert load_signing_key(tmp_path / "signer").public.key_id == key.public.key_id


@pytest.mark.parametrize("mode", [0o666, 0o664, 0o646], ids=oct)
def test_a_public_key_writable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    generate_key(tmp_path / "signer")
    os.chmod(tmp_path / "signer.pub", mode)
    with pytest.raises(InputError, match=rf"has mode {mode:04o}: a trusted public key must not"):
        load_public_key(tmp_path / "signer.pub")


def test_a_public_key_is_not_a_private_key(tmp_path: Path) -> None:
    generate_key(tmp_path / "signer")
    os.chmod(tmp_path / "signer.pub", 0o600)
    with pytest.raises(InputError, match=r"is not an unencrypted PEM private key"):
        load_signing_key(tmp_path / "signer.pub")


# -- DSSE ------------------------------------------------------------------------------------


def test_pae_is_the_dsse_v1_encoding() -> None:
    # the test vector of the DSSE protocol (secure-systems-lab/dsse, protocol.md)
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("", b"") == b"DSSEv1 0  0 "
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_a_signature_covers_the_pae_not_the_bare_payload(keys: dict[str, SigningKey]) -> None:
    envelope = Envelope(b"{}", PAYLOAD_TYPE).signed_by(keys["producer"])
    public = keys["producer"].public
    assert public.verify(envelope.signatures[0].sig, pae(PAYLOAD_TYPE, b"{}"))
    assert not public.verify(envelope.signatures[0].sig, b"{}")


def test_parse_envelope_names_the_bad_field() -> None:
    with pytest.raises(ValueError, match=r"^payload is not base64"):
        parse_envelope({"payload": "a$b", "payloadType": "x", "signatures": [{"sig": "AA=="}]})
    with pytest.raises(ValueError, match=r"^signatures is missing or empty"):
        parse_envelope({"payload": "", "payloadType": "x", "signatures": []})
    with pytest.raises(ValueError, match=r"^the envelope has unknown fields: extra"):
        parse_envelope({"payload": "", "payloadType": "x", "signatures": [], "extra": 1})


# -- the statement ---------------------------------------------------------------------------


def test_the_statement_names_the_run_and_its_ids(run_dir: Path) -> None:
    statement = run_statement(run_dir)
    plan = Plan.model_validate_json((run_dir / "plan.json").read_bytes())
    runtime = ExecutionRuntime.model_validate_json((run_dir / "runtime.json").read_bytes())
    report = Report.model_validate_json((run_dir / "report.json").read_bytes())
    manifest_hex = digest((run_dir / "manifest.json").read_bytes())[7:]
    assert statement == {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": run_dir.name, "digest": {"sha256": manifest_hex}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "plan": plan.id,
            "runtime": runtime.id,
            "toolset": runtime.toolset.id,
            "report": report.id,
            "checks": report.sequence,
            "policy": "strict",
            "verdict": "passed",
        },
    }


def test_attesting_writes_beside_the_run_and_leaves_the_run_untouched(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    before = {rel: (run_dir / rel).read_bytes() for rel in run_files(run_dir)}
    result = attest_run(run_dir, keys["producer"])
    root = run_dir.parent.parent
    assert result.path == root / "attestations" / f"{run_dir.name}.dsse.json"
    assert {rel: (run_dir / rel).read_bytes() for rel in run_files(run_dir)} == before
    assert check_manifest(run_dir)[2] == []
    envelope = parse_envelope(_envelope(run_dir))
    assert envelope.payload == canonical_json(run_statement(run_dir))
    assert envelope.payload_type == "application/vnd.in-toto+json"
    assert [item.keyid for item in envelope.signatures] == [keys["producer"].public.key_id]
    stored = root / "attestations" / "keys" / (keys["producer"].public.key_id[7:] + ".pub")
    assert stored.read_bytes() == keys["producer"].public.pem()
    assert check_attestations(run_dir, signers=[keys["producer"].public]).ok


def test_producer_and_reviewer_sign_one_envelope(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    result = attest_run(run_dir, keys["reviewer"])
    assert result.signatures == (keys["producer"].public.key_id, keys["reviewer"].public.key_id)
    both = check_attestations(run_dir, signers=[keys["producer"].public, keys["reviewer"].public])
    assert both.ok
    assert sorted(both.verified) == sorted(k.public.key_id for k in keys.values())
    again = attest_run(run_dir, keys["producer"])  # re-signing replaces, never duplicates
    assert len(again.signatures) == 2


def test_a_missing_reviewer_signature_is_named(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    reviewer = keys["reviewer"].public
    assert _problems(run_dir, keys["producer"], keys["reviewer"]) == [
        f"no valid signature by {reviewer.key_id} ({reviewer.path}) on run {run_dir.name} "
        f"(signed by: {keys['producer'].public.key_id})"
    ]


def test_no_attestation_is_refused_only_when_asked_for(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    assert check_attestations(run_dir).ok
    where = attestation_path(run_dir)
    message = f"run {run_dir.name} has no attestation (looked for {where})"
    assert check_attestations(run_dir, require=True).problems == [message]
    assert _problems(run_dir, keys["producer"]) == [message]


def test_require_signature_without_pinned_keys_uses_the_stored_copies(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    check = check_attestations(run_dir, require=True)
    assert (check.ok, check.pinned, list(check.verified)) == (
        True,
        False,
        [keys["producer"].public.key_id],
    )
    stored = attestation_path(run_dir).parent / "keys"
    shutil.rmtree(stored)
    assert check_attestations(run_dir, require=True).problems == [
        f"run {run_dir.name} has no valid signature"
    ]


def test_an_altered_envelope_is_never_overwritten(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    document = _envelope(run_dir)
    document["payload"] = base64.b64encode(b'{"other": 1}').decode()
    _write_envelope(run_dir, document)
    with pytest.raises(InputError, match=r"holds a different statement .* it is not overwritten"):
        attest_run(run_dir, keys["reviewer"])


def test_a_tampered_run_is_not_attested(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    (run_dir / "claims.json").write_bytes(b"[]")
    with pytest.raises(VerificationError, match=r"does not pass its manifest check \(claims.json"):
        attest_run(run_dir, keys["producer"])
    assert not attestation_path(run_dir).exists()


def test_out_writes_the_envelope_elsewhere(
    run_dir: Path, keys: dict[str, SigningKey], tmp_path: Path
) -> None:
    out = tmp_path / "signed.dsse.json"
    attest_run(run_dir, keys["producer"], out=out)
    assert not attestation_path(run_dir).exists()
    assert check_attestations(run_dir, signers=[keys["producer"].public], files=[out]).ok


# -- refusals, each with its reason ----------------------------------------------------------


def test_wrong_key(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    reviewer = keys["reviewer"].public
    assert _problems(run_dir, keys["reviewer"]) == [
        f"no valid signature by {reviewer.key_id} ({reviewer.path}) on run {run_dir.name} "
        f"(signed by: {keys['producer'].public.key_id})"
    ]


def test_a_wrong_key_claiming_the_trusted_key_id(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["reviewer"])
    document = _envelope(run_dir)
    document["signatures"][0]["keyid"] = keys["producer"].public.key_id
    _write_envelope(run_dir, document)
    assert _problems(run_dir, keys["producer"]) == [
        f"{attestation_path(run_dir)}: the signature by {keys['producer'].public.key_id} does "
        "not verify (the envelope or its statement was altered after signing)"
    ]


def test_a_flipped_byte_in_the_envelope(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    document = _envelope(run_dir)
    payload = bytearray(base64.b64decode(document["payload"]))
    payload[-3] ^= 0x01  # inside the statement's last string: still valid JSON
    document["payload"] = base64.b64encode(bytes(payload)).decode()
    _write_envelope(run_dir, document)
    problems = _problems(run_dir, keys["producer"])
    assert problems[0] == (
        f"{attestation_path(run_dir)}: the signature by {keys['producer'].public.key_id} does "
        "not verify (the envelope or its statement was altered after signing)"
    )


def test_a_flipped_byte_in_the_envelope_file(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    path = attestation_path(run_dir)
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01  # "{" -> "z": not JSON any more
    path.write_bytes(bytes(data))
    assert _problems(run_dir, keys["producer"])[0].startswith(
        f"{path}: not a DSSE envelope: Expecting value: line 1 column 1"
    )


def test_a_changed_statement_with_the_old_signature(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    document = _envelope(run_dir)
    statement = json.loads(base64.b64decode(document["payload"]))
    statement["predicate"]["verdict"] = "failed"
    document["payload"] = base64.b64encode(canonical_json(statement)).decode()
    _write_envelope(run_dir, document)
    name = attestation_path(run_dir)
    assert _problems(run_dir, keys["producer"]) == [
        f"{name}: the signature by {keys['producer'].public.key_id} does not verify (the "
        "envelope or its statement was altered after signing)",
        f"{name}: predicate verdict is 'failed', the run has 'passed'",
    ]


def test_a_signed_statement_that_lies_about_the_run(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    statement = run_statement(run_dir)
    statement["predicate"]["report"] = "report_" + "0" * 64
    envelope = Envelope(canonical_json(statement), PAYLOAD_TYPE).signed_by(keys["producer"])
    path = attestation_path(run_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(canonical_json(envelope.to_json()))
    report = Report.model_validate_json((run_dir / "report.json").read_bytes())
    assert _problems(run_dir, keys["producer"]) == [
        f"{path}: predicate report is 'report_{'0' * 64}', the run has '{report.id}'"
    ]


def test_a_statement_moved_to_another_run(
    tmp_path: Path, run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    other = run(tmp_path / "root", base_spec(seed=2), make_toolset(Counter())).path
    shutil.copy(attestation_path(run_dir), attestation_path(other))
    name = attestation_path(other)
    manifest_hex = digest((other / "manifest.json").read_bytes())[7:]
    problems = _problems(other, keys["producer"])
    assert problems[:2] == [
        f"{name}: the statement's subject is {run_dir.name!r}, not this run {other.name} "
        "(a statement about another run)",
        f"{name}: the subject digest sha256:{digest((run_dir / 'manifest.json').read_bytes())[7:]}"
        f" is not the digest of this run's manifest.json (sha256:{manifest_hex})",
    ]
    assert any(problem.startswith(f"{name}: predicate runtime is ") for problem in problems)


def test_a_run_changed_and_remanifested_after_signing(
    run_dir: Path, keys: dict[str, SigningKey]
) -> None:
    attest_run(run_dir, keys["producer"])
    signed_at = attestation_path(run_dir)
    claims = json.loads((run_dir / "claims.json").read_bytes())
    (run_dir / "claims.json").write_bytes(canonical_json(claims[:1]))
    forged = remanifest(run_dir)  # an attacker who also forges the manifest: a new run id
    shutil.copy(signed_at, attestation_path(forged))
    problems = _problems(forged, keys["producer"])
    assert problems[0] == (
        f"{attestation_path(forged)}: the statement's subject is {run_dir.name!r}, not this run "
        f"{forged.name} (a statement about another run)"
    )


def test_a_truncated_signature(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    document = _envelope(run_dir)
    sig = base64.b64decode(document["signatures"][0]["sig"])
    document["signatures"][0]["sig"] = base64.b64encode(sig[:-1]).decode()
    _write_envelope(run_dir, document)
    assert _problems(run_dir, keys["producer"]) == [
        f"{attestation_path(run_dir)}: the signature by {keys['producer'].public.key_id} is 63 "
        "bytes, an Ed25519 signature is 64 (truncated or padded)"
    ]


def test_a_wrong_payload_type(run_dir: Path, keys: dict[str, SigningKey]) -> None:
    attest_run(run_dir, keys["producer"])
    document = _envelope(run_dir)
    document["payloadType"] = "application/json"
    _write_envelope(run_dir, document)
    problems = _problems(run_dir, keys["producer"])
    assert problems[0] == (
        f"{attestation_path(run_dir)}: payloadType is 'application/json', not "
        "application/vnd.in-toto+json"
    )
    assert "does not verify" in problems[1]  # the type is covered by the PAE


def test_public_key_of_builds_the_same_key_id(keys: dict[str, SigningKey]) -> None:
    public = keys["producer"].public
    assert PublicKey.of(public.key).key_id == public.key_id
