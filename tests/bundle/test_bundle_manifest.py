from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from toolproof.bundle import manifest as manifest_module
from toolproof.bundle.manifest import BLOCK_BYTES, build_manifest, check_manifest, hash_file
from toolproof.contract.runs import Manifest
from toolproof.identity import canonical_json


@pytest.mark.parametrize("size", [0, 5, BLOCK_BYTES - 1, BLOCK_BYTES, BLOCK_BYTES + 1, 9 << 20])
def test_hash_file_matches_hashlib_at_block_boundaries(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert hash_file(tmp_path / "f") == (size, "sha256:" + hashlib.sha256(data).hexdigest())


def test_run_id_ignores_timings_but_files_digest_covers_it(tmp_path: Path) -> None:
    (tmp_path / "spec.json").write_bytes(b"{}")
    (tmp_path / "timings.json").write_bytes(b'{"wall_seconds":1}')
    first = build_manifest(tmp_path)
    (tmp_path / "timings.json").write_bytes(b'{"wall_seconds":2}')
    second = build_manifest(tmp_path)
    assert first.run_id == second.run_id
    assert first.files_digest != second.files_digest
    forged = first.to_json() | {"files_digest": second.files_digest}
    with pytest.raises(ValueError, match=r"files_digest sha256:[0-9a-f]{64} does not match"):
        Manifest.model_validate(forged)


def test_a_file_of_another_size_is_refused_by_size_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spec.json").write_bytes(b"{}")
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "big").write_bytes(b"raw")
    manifest = build_manifest(tmp_path)
    (tmp_path / "manifest.json").write_bytes(canonical_json(manifest.to_json()))
    os.truncate(tmp_path / "evidence" / "big", 20 << 30)  # 20 GiB, sparse: nothing written
    read: list[str] = []

    def counted(path: Path) -> tuple[int, str]:
        read.append(path.relative_to(tmp_path).as_posix())
        assert path.name != "big", "the oversized file was read"
        return hash_file(path)

    monkeypatch.setattr(manifest_module, "hash_file", counted)
    checked, digests, findings = check_manifest(tmp_path)
    assert checked == manifest
    assert [(f.file, f.message) for f in findings] == [
        (
            "evidence/big",
            "evidence/big has size 21474836480 bytes, the manifest says 3 "
            "(truncated, appended or replaced; refused by size, not read)",
        )
    ]
    assert read == ["spec.json"]
    assert list(digests) == ["spec.json"]
