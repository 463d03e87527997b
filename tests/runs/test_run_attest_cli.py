"""``toolproof keygen|attest`` and ``verify --signer``: real ``toolproof`` processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_support import Ran, toolproof
from runs_support import Counter, base_spec, make_toolset, run


def _cli(*args: str, cwd: Path) -> Ran:
    return toolproof(*args, cwd=cwd)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    run(tmp_path, base_spec(), make_toolset(Counter()))
    for name in ("producer", "reviewer"):
        done = _cli("keygen", "--out", name, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    return tmp_path


def _run_id(root: Path) -> str:
    return next((root / "runs").iterdir()).name


def test_keygen_attest_verify(root: Path) -> None:
    keygen = _cli("keygen", "--out", "third", "--json", cwd=root)
    document = json.loads(keygen.stdout)
    assert document["key"] == "third" and document["public_key"] == "third.pub"
    assert document["key_id"].startswith("sha256:")
    assert oct((root / "third").stat().st_mode & 0o777) == "0o600"
    run_id = _run_id(root)
    for name in ("producer", "reviewer"):
        done = _cli("attest", run_id, "--key", name, cwd=root)
        assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == (
        f"envelope {root}/attestations/{run_id}.dsse.json (2 signatures)"
    )
    verify = _cli(
        "verify", run_id, "--signer", "producer.pub", "--signer", "reviewer.pub", cwd=root
    )
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.splitlines()[-1] == "verified"
    as_json = json.loads(
        _cli("verify", run_id, "--signer", "producer.pub", "--json", cwd=root).stdout
    )
    assert as_json["ok"] is True
    assert as_json["attestations"]["pinned"] is True
    assert as_json["attestations"]["files"] == [f"{root}/attestations/{run_id}.dsse.json"]


def test_verify_with_the_wrong_key_exits_2_naming_it(root: Path) -> None:
    run_id = _run_id(root)
    assert _cli("attest", run_id, "--key", "producer", cwd=root).returncode == 0
    reviewer = json.loads(_cli("keygen", "--out", "x", "--json", cwd=root).stdout)["key_id"]
    done = _cli("verify", run_id, "--signer", "x.pub", cwd=root)
    assert done.returncode == 2
    assert f"[attestation] no valid signature by {reviewer} (x.pub) on run {run_id}" in (
        _one_line(done.stderr)
    )
    assert done.stdout.splitlines()[-1] == "verification FAILED"
    document = json.loads(_cli("verify", run_id, "--signer", "x.pub", "--json", cwd=root).stdout)
    assert document["ok"] is False


def test_require_signature_refuses_an_unsigned_run(root: Path) -> None:
    run_id = _run_id(root)
    done = _cli("verify", run_id, "--require-signature", cwd=root)
    assert done.returncode == 2
    assert f"run {run_id} has no attestation" in _one_line(done.stderr)
    assert _cli("verify", run_id, cwd=root).returncode == 0  # not asked: no signature needed


def test_a_flipped_byte_in_the_signed_run_exits_2_with_the_manifest_reason(root: Path) -> None:
    run_id = _run_id(root)
    assert _cli("attest", run_id, "--key", "producer", cwd=root).returncode == 0
    claims = root / "runs" / run_id / "claims.json"
    data = bytearray(claims.read_bytes())
    data[len(data) // 2] ^= 0x20
    claims.write_bytes(bytes(data))
    done = _cli("verify", run_id, "--signer", "producer.pub", cwd=root)
    assert done.returncode == 2
    assert "FAIL [manifest] claims.json: claims.json has digest" in _one_line(done.stderr)
    attest = _cli("attest", run_id, "--key", "reviewer", cwd=root)
    assert attest.returncode == 2
    assert "is not attested: [manifest] claims.json: claims.json has digest" in _one_line(
        attest.stderr
    )


def test_a_wide_open_private_key_is_refused_with_exit_1(root: Path) -> None:
    os.chmod(root / "producer", 0o644)
    done = _cli("attest", _run_id(root), "--key", "producer", cwd=root)
    assert done.returncode == 1
    assert _one_line(done.stderr) == (
        "error: key file producer has mode 0644: a private key must be readable by its owner "
        "only (chmod 600)"
    )
    assert not (root / "attestations").exists()


def test_a_writable_trusted_key_is_refused_with_exit_1(root: Path) -> None:
    run_id = _run_id(root)
    assert _cli("attest", run_id, "--key", "producer", cwd=root).returncode == 0
    os.chmod(root / "producer.pub", 0o666)
    done = _cli("verify", run_id, "--signer", "producer.pub", cwd=root)
    assert done.returncode == 1
    assert "key file producer.pub has mode 0666: a trusted public key must not be writable" in (
        _one_line(done.stderr)
    )
