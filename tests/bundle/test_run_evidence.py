"""RunEvidence: the one seam every reader of a run's evidence bytes goes through."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from toolproof.bundle.evidence import LAYOUT_FILES, EvidenceItem, RunEvidence

ITEMS = (b"alpha beta gamma", b'{"value":42}', b"")


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_run(tmp_path: Path) -> Path:
    folder = tmp_path / "evidence"
    folder.mkdir()
    for data in ITEMS:
        (folder / _hex(data)).write_bytes(data)
    return tmp_path


def test_a_files_layout_run_is_read_by_hex_or_evidence_id(tmp_path: Path) -> None:
    evidence = RunEvidence.open(_files_run(tmp_path))
    key = _hex(ITEMS[0])
    assert evidence.layout == LAYOUT_FILES
    assert key in evidence and "evidence_" + key in evidence
    assert "0" * 64 not in evidence and "../evidence" not in evidence and 3 not in evidence
    assert evidence.read(key) == b"alpha beta gamma"
    assert evidence.read("evidence_" + key, 6, 10) == b"beta"  # offsets within the item
    assert evidence.read(key, 12, 99) == b"amma"  # fewer when the item is shorter
    assert evidence.size(key) == 16
    assert evidence.size_and_digest(key) == (16, "sha256:" + key)
    assert evidence.path_of("evidence_" + key) == "evidence/" + key
    with pytest.raises(KeyError):
        evidence.read("0" * 64)


def test_items_lists_every_file_in_name_order_with_its_digest(tmp_path: Path) -> None:
    run = _files_run(tmp_path)
    (run / "evidence" / "stray").write_bytes(b"not named by its digest")
    evidence = RunEvidence.open(run)
    names = sorted([*(_hex(data) for data in ITEMS), "stray"])
    assert evidence.names() == names
    assert list(evidence.stored_files()) == [f"evidence/{name}" for name in names]
    stray = EvidenceItem(
        "stray", "evidence/stray", 23, "sha256:" + _hex(b"not named by its digest")
    )
    assert [item for item in evidence.items() if item.name == "stray"] == [stray]
    assert all(
        item.digest == "sha256:" + item.name for item in evidence.items() if item.name != "stray"
    )


def test_digests_the_manifest_check_verified_are_not_hashed_again(tmp_path: Path) -> None:
    run = _files_run(tmp_path)
    key = _hex(ITEMS[1])
    said = "sha256:" + "f" * 64  # what a caller vouches for is taken as is
    evidence = RunEvidence.open(run, {f"evidence/{key}": said}, {f"evidence/{key}": 12})
    assert evidence.size_and_digest(key) == (12, said)
    assert [item.digest for item in evidence.items() if item.name == key] == [said]


def test_a_run_without_evidence_has_no_items(tmp_path: Path) -> None:
    evidence = RunEvidence.open(tmp_path)
    assert evidence.names() == []
    assert list(evidence.items()) == []
