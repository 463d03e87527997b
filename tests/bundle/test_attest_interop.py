"""Attestations read by in-toto's and DSSE's own tooling, and valid against their schemas.

Schemas: tests/bundle/schemas (transcribed from the in-toto and DSSE specifications;
see the README there). Tooling: securesystemslib's DSSE ``Envelope`` (signature
verification with an ``SSlibKey``) and in-toto-attestation's ``Statement`` (protobuf
parse and ``validate()``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from cryptography.hazmat.primitives import serialization
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from runs_support import Counter, base_spec, make_toolset, run
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError as SslibVerificationError
from securesystemslib.signer import SSlibKey

from toolproof.bundle.attest import attest_run
from toolproof.bundle.dsse import PublicKey, SigningKey, generate_key

SCHEMAS = Path(__file__).resolve().parent / "schemas"


def _schema(name: str) -> Any:
    return jsonschema_rs.validator_for(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))


def _sslib_key(public: PublicKey) -> SSlibKey:
    raw = public.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return SSlibKey(public.key_id, "ed25519", "ed25519", {"public": raw.hex()})


@pytest.fixture
def signed(tmp_path: Path) -> tuple[dict[str, Any], SigningKey, SigningKey]:
    run_dir = run(tmp_path / "root", base_spec(), make_toolset(Counter())).path
    producer = generate_key(tmp_path / "producer")
    reviewer = generate_key(tmp_path / "reviewer")
    attest_run(run_dir, producer)
    path = attest_run(run_dir, reviewer).path
    envelope: dict[str, Any] = json.loads(path.read_bytes())
    return envelope, producer, reviewer


def test_envelope_and_statement_validate_against_the_schemas(
    signed: tuple[dict[str, Any], SigningKey, SigningKey],
) -> None:
    envelope = signed[0]
    _schema("envelope.schema.json").validate(envelope)
    statement = json.loads(base64.b64decode(envelope["payload"]))
    _schema("statement.v1.schema.json").validate(statement)


def test_the_schemas_refuse_what_the_specs_refuse() -> None:
    statement = _schema("statement.v1.schema.json")
    good = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "run_x", "digest": {"sha256": "a" * 64}}],
        "predicateType": "https://toolproof.dev/attestation/run/v1",
        "predicate": {"verdict": "passed"},
    }
    assert statement.is_valid(good)
    assert not statement.is_valid({**good, "subject": [{"name": "run_x"}]})  # digest required
    assert not statement.is_valid({**good, "subject": []})
    assert not statement.is_valid({**good, "_type": "https://in-toto.io/Statement/v0.1"})
    envelope = _schema("envelope.schema.json")
    assert not envelope.is_valid({"payload": "", "payloadType": "x", "signatures": []})


def test_securesystemslib_verifies_both_signatures(
    signed: tuple[dict[str, Any], SigningKey, SigningKey],
) -> None:
    document, producer, reviewer = signed
    envelope = SslibEnvelope.from_dict(document)
    keys = [_sslib_key(producer.public), _sslib_key(reviewer.public)]
    verified = envelope.verify(keys, threshold=2)
    assert sorted(verified) == sorted([producer.public.key_id, reviewer.public.key_id])
    assert envelope.payload_type == "application/vnd.in-toto+json"


def test_securesystemslib_refuses_a_flipped_payload_byte(
    signed: tuple[dict[str, Any], SigningKey, SigningKey],
) -> None:
    document, producer, _ = signed
    payload = bytearray(base64.b64decode(document["payload"]))
    payload[-3] ^= 0x01
    document = {**document, "payload": base64.b64encode(bytes(payload)).decode()}
    with pytest.raises(SslibVerificationError, match=r"Accepted signatures do not match threshold"):
        SslibEnvelope.from_dict(document).verify([_sslib_key(producer.public)], threshold=1)


def test_in_toto_attestation_reads_and_validates_the_statement(
    signed: tuple[dict[str, Any], SigningKey, SigningKey],
) -> None:
    payload = SslibEnvelope.from_dict(signed[0]).payload
    message = json_format.Parse(payload, statement_pb2.Statement())  # unknown fields refused
    statement = Statement.copy_from_pb(message)
    statement.validate()
    assert statement.pb.type == "https://in-toto.io/Statement/v1"
    assert statement.pb.predicate_type == "https://toolproof.dev/attestation/run/v1"
    assert statement.pb.subject[0].name.startswith("run_")
    assert len(statement.pb.subject[0].digest["sha256"]) == 64
    assert statement.pb.predicate["verdict"] == "passed"
