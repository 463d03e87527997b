from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import ClassVar

import pytest
from runs_support import Counter, make_toolset, run

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.pack import read_pack
from toolproof.contract.evidence import Claim, ClaimStatus, ClaimType, EvidenceRecord
from toolproof.contract.runs import PlanNode
from toolproof.errors import InputError
from toolproof.evidence.reasoners import (
    Reasoner,
    ReasonerRequest,
    StepOutput,
    register_reasoner,
)
from toolproof.evidence.store import EvidenceStore
from toolproof.identity import digest
from toolproof.runs.executor import StepContext
from toolproof.runs.registries import RunRegistries
from toolproof.verify.verifier import verify_run

REGISTRIES = RunRegistries()


def test_put_stores_exact_bytes_once_per_digest(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path)
    data = "naïve café\n".encode()
    record = EvidenceRecord.model_validate(
        store.put(data, media_type="text/plain; charset=utf-8", kind="chunk", step="s")
    )
    again = EvidenceRecord.model_validate(
        store.put(data, media_type="text/plain; charset=utf-8", kind="chunk", step="s")
    )
    assert record == again
    assert record.digest == digest(data)
    assert record.path == "evidence/" + digest(data)[7:]  # the item's name
    store.close(sync=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence.idx", "evidence.pack"]
    assert RunEvidence.open(tmp_path).read(record.id) == data
    assert store.total_bytes == len(data)
    index = (tmp_path / "evidence.idx").read_bytes()
    assert store.stored_files() == {"evidence.idx": (len(index), digest(index))}


def test_support_counts_offsets_within_the_evidence_item(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path)
    record = EvidenceRecord.model_validate(
        store.put(b"alpha beta gamma", media_type="text/plain", kind="chunk", step="s")
    )
    support = store.support(record.id, 6, 10)
    assert (support.start, support.end, support.sha256) == (6, 10, digest(b"beta"))
    found = store.find(record.id, b"gamma")
    assert found is not None and (found.start, found.end) == (11, 16)
    assert store.find(record.id, b"delta") is None


@pytest.mark.parametrize(("start", "end"), [(3, 3), (5, 2), (-1, 2), (0, 17)])
def test_empty_or_out_of_bounds_spans_are_refused(tmp_path: Path, start: int, end: int) -> None:
    store = EvidenceStore(tmp_path)
    record = EvidenceRecord.model_validate(
        store.put(b"alpha beta gamma", media_type="text/plain", kind="chunk", step="s")
    )
    with pytest.raises(InputError) as info:
        store.support(record.id, start, end)
    assert info.value.message == (
        f"support interval [{start}, {end}) is not a non-empty interval within {record.id} "
        "(16 bytes)"
    )


def test_unknown_evidence_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no evidence evidence_00"):
        EvidenceStore(tmp_path).support("evidence_" + "0" * 64, 0, 1)


DOCUMENT = (
    b"First chunk: nothing here.\n\nSecond chunk: the plum shelf is B4. Plums are kept cold.\n"
)
SECOND = DOCUMENT.index(b"Second")


async def _chunk_handler(node: PlanNode, context: StepContext) -> StepOutput:
    chunk = DOCUMENT[SECOND:]
    record = context.register_evidence(
        chunk,
        media_type="text/plain; charset=utf-8",
        detail={
            "document": "shelves.txt",
            "chunk": 1,
            "document_start": SECOND,
            "document_end": len(DOCUMENT),
        },
    )
    return StepOutput(node.id, True, {"chunks": 1}, (record,))


@register_reasoner(registry=REGISTRIES.reasoners)
class _SentenceReasoner(Reasoner):
    name: ClassVar[str] = "test-sentence"

    async def derive(self, request: ReasonerRequest) -> list[Claim]:
        (record,) = request.evidence
        sentence = b"Plums are kept cold."
        support = request.store.find(record.id, sentence)
        assert support is not None
        return [
            Claim(
                statement=sentence.decode(),
                type=ClaimType.DERIVED,
                status=ClaimStatus.VALIDATED,
                supports=[support],
                reasoner=self.label,
            )
        ]


def test_span_inside_a_chunk_that_is_not_the_first_verifies(tmp_path: Path) -> None:
    spec = {
        "task": "Where are plums kept?",
        "steps": [{"id": "search", "kind": "retrieve", "params": {"query": "plums"}}],
        "reasoner": {"name": "test-sentence"},
    }
    outcome = run(
        tmp_path,
        spec,
        make_toolset(Counter()),
        handlers={"retrieve": _chunk_handler},
        registries=REGISTRIES,
    )
    (claim,) = outcome.outcome.claims
    (support,) = claim.supports
    chunk = DOCUMENT[SECOND:]
    assert (support.start, support.end) == (chunk.index(b"Plums"), len(chunk) - 1)
    # offsets count from the chunk's first byte, not from the document's (nor the pack's)
    evidence = RunEvidence.open(outcome.path).read(support.evidence)
    assert evidence[support.start : support.end] == b"Plums are kept cold."
    assert DOCUMENT[support.start : support.end] != b"Plums are kept cold."
    assert verify_run(outcome.path).ok


def test_a_short_write_is_finished_and_the_pack_holds_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_writev, real_write = os.writev, os.write
    sizes: list[int] = []

    def short_writev(fd: int, parts: list[bytes]) -> int:
        joined = b"".join(parts)
        sizes.append(len(joined))
        return real_writev(fd, [joined[:4]])

    def short_write(fd: int, data: bytes | memoryview) -> int:
        sizes.append(len(data))
        return real_write(fd, bytes(data[:40]))

    store = EvidenceStore(tmp_path)
    data = b'{"n":12,"square":144}'
    monkeypatch.setattr(os, "writev", short_writev)
    monkeypatch.setattr(os, "write", short_write)
    record = store.put(data, media_type="application/json", kind="tool_result", step="s")
    monkeypatch.undo()
    assert sizes == [89, 85, 45, 5]  # its line (68 bytes) and its 21 bytes, to the last one
    store.close(sync=False)
    assert RunEvidence.open(tmp_path).read(record["id"]) == data
    assert store.total_bytes == 21


def test_a_failed_write_leaves_nothing_of_the_item_and_names_the_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, parts: list[bytes]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    store = EvidenceStore(tmp_path)
    size = store.stored_bytes
    monkeypatch.setattr(os, "writev", full)
    with pytest.raises(OSError, match="No space left on device") as caught:
        store.put(b"abc", media_type="text/plain", kind="tool_result", step="s")
    monkeypatch.undo()
    assert caught.value.filename == str(tmp_path / "evidence.pack")
    assert (tmp_path / "evidence.pack").stat().st_size == size == 26  # the header line only
    assert store.total_bytes == 0
    record = store.put(b"abc", media_type="text/plain", kind="tool_result", step="s")
    store.close(sync=False)
    evidence = RunEvidence.open(tmp_path)
    assert [item.name for item in evidence.items()] == [record["id"].removeprefix("evidence_")]


def test_a_store_adopting_a_pack_takes_items_stored_in_its_order_and_cuts_the_rest(
    tmp_path: Path,
) -> None:
    fresh, adopting = tmp_path / "fresh", tmp_path / "adopting"
    fresh.mkdir()
    adopting.mkdir()
    live = EvidenceStore(adopting, live=True)
    for data in (b"alpha", b"beta", b"gamma"):
        live.put(data, media_type="text/plain", kind="chunk", step="s")
    live.close(sync=False)
    adopt = read_pack(adopting / "evidence.pack").items
    store = EvidenceStore(
        adopting, adopt=[(name, offset, size) for name, (offset, size) in adopt.items()]
    )
    reference = EvidenceStore(fresh)
    for data in (b"alpha", b"delta"):  # alpha is taken, delta differs: beta and gamma cut
        for each in (store, reference):
            each.put(data, media_type="text/plain", kind="chunk", step="s")
    assert store.read("evidence_" + digest(b"alpha")[7:]) == b"alpha"
    store.close(sync=False)
    reference.close(sync=False)
    for name in ("evidence.pack", "evidence.idx"):
        assert (adopting / name).read_bytes() == (fresh / name).read_bytes()
