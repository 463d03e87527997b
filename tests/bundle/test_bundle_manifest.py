from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from toolproof.bundle.manifest import BLOCK_BYTES, build_manifest, hash_file
from toolproof.contract.runs import Manifest


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
