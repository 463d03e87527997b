"""RunEvidence: the one seam every reader of a run's evidence bytes goes through."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from toolproof.bundle.evidence import LAYOUT_FILES, LAYOUT_PACK, EvidenceItem, RunEvidence
from toolproof.bundle.pack import PACK_HEADER
from toolproof.bundle.packindex import INDEX_HEADER, RECORD_BYTES, index_record
from toolproof.errors import VerificationError
from toolproof.evidence.store import EvidenceStore

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


# -- the pack layout: evidence.pack and its sorted index evidence.idx ---------------------


def _packed_run(tmp_path: Path) -> Path:
    store = EvidenceStore(tmp_path)
    for data in ITEMS:
        store.put(data, media_type="text/plain", kind="chunk", step="s")
    store.close(sync=False)
    return tmp_path


def _records(run: Path) -> list[bytes]:
    body = (run / "evidence.idx").read_bytes()[len(INDEX_HEADER) :]
    return [body[at : at + RECORD_BYTES] for at in range(0, len(body), RECORD_BYTES)]


def _write_records(run: Path, records: list[bytes]) -> None:
    (run / "evidence.idx").write_bytes(INDEX_HEADER + b"".join(records))


def _refusal(run: Path) -> str:
    with pytest.raises(VerificationError) as caught:
        list(RunEvidence.open(run).items())
    return caught.value.message


def test_a_run_stores_its_evidence_in_one_pack_and_a_sorted_index(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    assert sorted(path.name for path in run.iterdir()) == ["evidence.idx", "evidence.pack"]
    pack = (run / "evidence.pack").read_bytes()
    assert pack == PACK_HEADER + b"".join(
        b"%s %d\n%s" % (_hex(data).encode(), len(data), data) for data in ITEMS
    )
    offsets = {
        _hex(data): pack.index(b"%s %d\n" % (_hex(data).encode(), len(data))) for data in ITEMS
    }
    expected = sorted(
        index_record(_hex(data), offsets[_hex(data)] + 64 + 2 + len(str(len(data))), len(data))
        for data in ITEMS
    )
    assert _records(run) == expected
    assert (run / "evidence.idx").read_bytes().startswith(b"toolproof-evidence-index 1\n")
    assert len(expected[0]) == RECORD_BYTES == 99


def test_a_packed_item_is_read_by_its_digest_with_offsets_within_the_item(
    tmp_path: Path,
) -> None:
    evidence = RunEvidence.open(_packed_run(tmp_path))
    key = _hex(ITEMS[0])
    assert evidence.layout == LAYOUT_PACK
    assert key in evidence and "evidence_" + key in evidence and "0" * 64 not in evidence
    assert evidence.read(key) == b"alpha beta gamma"
    assert evidence.read("evidence_" + key, 6, 10) == b"beta"  # never offsets within the pack
    assert evidence.read(key, 12, 99) == b"amma"
    assert evidence.read(_hex(b"")) == b""
    assert evidence.size(_hex(ITEMS[1])) == 12
    assert evidence.size_and_digest(key) == (16, "sha256:" + key)
    assert evidence.names() == sorted(_hex(data) for data in ITEMS)
    assert list(evidence.stored_files()) == ["evidence.idx", "evidence.pack"]
    assert [item.name for item in evidence.items()] == [_hex(data) for data in ITEMS]  # pack order
    with pytest.raises(KeyError):
        evidence.read("0" * 64)


def test_an_index_record_pointing_past_the_pack_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    records = _records(run)
    name = records[0][:64].decode()
    records[0] = index_record(name, 400, 16)
    _write_records(run, records)
    size = (run / "evidence.pack").stat().st_size
    expected = (
        f"evidence.idx at byte 27: record 1 ({name}) points past the end of evidence.pack "
        f"(bytes [400, 416) of a {size}-byte pack)"
    )
    assert _refusal(run) == expected
    with pytest.raises(VerificationError, match=re.escape(expected)):
        RunEvidence.open(run).read(name)


def test_a_pack_truncated_mid_item_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    pack = run / "evidence.pack"
    at = len(PACK_HEADER) + 64 + 4 + 16  # item 2's line
    os.truncate(pack, at + 64 + 4 + 4)
    assert _refusal(run) == (
        f"evidence.pack at byte {at}: item 2 ({_hex(ITEMS[1])}) is torn: the file ends "
        "after 4 of its 12 bytes"
    )
    os.truncate(pack, at + 20)
    assert (
        _refusal(run)
        == f"evidence.pack at byte {at}: item 2's line is torn: the file ends inside it"
    )


def test_an_index_out_of_order_or_with_a_repeated_digest_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    records = _records(run)
    first, second = (record[:64].decode() for record in records[:2])
    _write_records(run, [records[1], records[0], records[2]])
    assert _refusal(run) == (
        f"evidence.idx at byte 126: record 2 ({first}) sorts before the digest of record 1 "
        "(records are sorted by digest, each digest once)"
    )
    _write_records(run, [records[0], records[0], records[2]])
    assert _refusal(run) == (
        f"evidence.idx at byte 126: record 2 ({first}) repeats the digest of record 1 "
        "(records are sorted by digest, each digest once)"
    )
    _write_records(run, records[:2])
    assert _refusal(run) == (
        "evidence.idx at byte 225: has 2 records, evidence.pack holds 3 items "
        "(each item has exactly one record)"
    )
    assert second


def test_an_item_whose_bytes_do_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    pack = run / "evidence.pack"
    data = pack.read_bytes()
    pack.write_bytes(data.replace(b"alpha beta", b"alpha BETA"))
    key = _hex(ITEMS[0])
    at = len(PACK_HEADER)
    assert (
        _refusal(run)
        == f"evidence.pack at byte {at}: item 1's bytes do not hash to its digest {key}"
    )
    evidence = RunEvidence.open(run)
    assert evidence.read(key, 6, 10) == b"BETA"  # a span is checked by its support's digest
    with pytest.raises(VerificationError) as caught:
        evidence.read(key)
    assert caught.value.message == (
        f"evidence.pack at byte {at}: the bytes of item {key} do not hash to its digest"
    )


def test_an_index_record_not_at_its_item_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    records = _records(run)
    key = _hex(ITEMS[0])
    number = next(i for i, record in enumerate(records) if record.startswith(key.encode()))
    records[number] = index_record(key, 10, 16)
    _write_records(run, records)
    assert _refusal(run) == (
        f"evidence.idx at byte {27 + 99 * number}: record {number + 1} ({key}) does not point "
        "at that item of evidence.pack (offset 10, size 16)"
    )
    with pytest.raises(VerificationError) as caught:
        RunEvidence.open(run).read(key, 0, 1)
    assert caught.value.message == (
        f"evidence.pack at byte 0: evidence.idx points at offset 10 for {key}, which is not "
        f"the start of that item's bytes (no line '{key} 16' before it)"
    )


def test_a_malformed_index_or_a_missing_half_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    index = run / "evidence.idx"
    records = _records(run)
    index.write_bytes(INDEX_HEADER + b"".join(records) + b"x")
    assert _refusal(run) == "evidence.idx at byte 324: ends inside a record (records are 99 bytes)"
    index.write_bytes(b"toolproof-evidence-index 9\n" + b"".join(records))
    assert _refusal(run) == (
        "evidence.idx at byte 0: does not start with its header line 'toolproof-evidence-index 1'"
    )
    _write_records(run, [records[0].replace(b" 0000", b" zzzz", 1), *records[1:]])
    assert _refusal(run) == (
        "evidence.idx at byte 27: record 1 is not '<64 hex> <16 hex offset> <16 hex size>'"
    )
    index.unlink()
    assert _refusal(run) == (
        "evidence.idx is missing: a run's evidence is evidence.pack read through "
        "evidence.idx, and it has one without the other"
    )


def test_a_packed_run_with_an_evidence_folder_is_refused(tmp_path: Path) -> None:
    run = _packed_run(tmp_path)
    (run / "evidence").mkdir()
    assert _refusal(run) == (
        "evidence/ is in a run whose evidence is evidence.pack: one run has one evidence layout"
    )
