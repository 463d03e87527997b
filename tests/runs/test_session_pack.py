"""A live session's evidence pack: read while live, exploded by finalize, recovered after a kill."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pack_support import record, step, toolset

from toolproof.bundle.evidence import RunEvidence
from toolproof.bundle.pack import PackWriter, read_pack
from toolproof.errors import VerificationError
from toolproof.runs.finalize import finalize_session, recover_session
from toolproof.runs.live import open_recording
from toolproof.verify.verifier import verify_run

SUPPORT = Path(__file__).with_name("pack_support.py")
RUN_ID = "run_ef48e737775b8fe0d360b0a6ba76337c0b973c5dc86438df5487188416df1c54"
"""The run of ``record(root, 6)`` finalized, its evidence in the run's ``evidence.pack``
and ``evidence.idx`` (issue 31 point 2; with a file per item it was
``run_f191f9cc5a9d...``; before its runtime.json recorded ``repeatable``, issue 34
point 4, ``run_21ef2ef32dc1...``; before its turns' keys were the chat completions
normal form, issue 32 point 3, ``run_aa71f4e0a42f...``): a session recorded before the
live pack (its items as files) and one recorded with it finalize into the same bytes."""


def _events(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (directory / "trace.jsonl").read_bytes().splitlines()]


def _registered(directory: Path) -> list[dict[str, Any]]:
    return [e["evidence"] for e in _events(directory) if e["type"] == "evidence_registered"]


def _item_offsets(records: list[dict[str, Any]]) -> list[int]:
    """Where each item's line starts, from the registered sizes (each digest once, in order)."""
    at, out, seen = 26, [], set()
    for registered in records:
        if registered["digest"] in seen:
            continue
        seen.add(registered["digest"])
        out.append(at)
        at += 64 + 1 + len(str(registered["size"])) + 1 + registered["size"]
    return [*out, at]


def _files(run: Path) -> dict[str, Any]:
    """Every file's bytes but the wall-clock ones: timings.json, and the manifest's entries
    without it (its files_digest covers timings.json)."""
    files: dict[str, Any] = {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name not in ("timings.json", "manifest.json")
    }
    manifest = json.loads((run / "manifest.json").read_bytes())
    entries = [e for e in manifest["files"] if e["path"] != "timings.json"]
    files["manifest.json"] = (manifest["run_id"], entries)
    return files


def test_a_live_session_appends_its_evidence_to_one_pack_and_reads_it_from_there(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        tools = toolset()
        session = open_recording(tmp_path, tools, task="evidence pack")
        for n in range(1, 5):
            await step(session, tools, n)
        store = session.recorder.store
        records = _registered(session.directory)
        assert [r["source"]["kind"] for r in records] == [
            "tool_result",
            "tool_result",
            "model_request",
            "model_response",
            "tool_result",
            "tool_result",
            "model_request",
            "model_response",
        ]
        third = records[4]["id"]
        assert store.read(third) == b'{"n":3,"text":"value 3"}'
        found = store.find(third, b"value 3")
        assert found is not None and (found.start, found.end) == (15, 22)
        assert store.support(third, 15, 22) == found
        assert store.read(records[7]["id"]) == b'{"choices":[{"message":{"content":"a2"}}]}'
        assert sorted(p.name for p in session.directory.iterdir()) == [
            "evidence.pack",
            "runtime.json",
            "session.json",
            "trace.jsonl",
        ]
        session.close()
        pack = read_pack(session.directory / "evidence.pack")
        assert pack.problem is None
        assert [pack.items[r["path"].removeprefix("evidence/")] for r in records] == [
            (offset + 64 + 1 + len(str(r["size"])) + 1, r["size"])
            for offset, r in zip(_item_offsets(records), records, strict=False)
        ]
        assert pack.end == pack.size == _item_offsets(records)[-1]

    asyncio.run(scenario())


def _as_files(live: Path, copy: Path) -> Path:
    """``live`` as a session recorded before the pack: its items as evidence/<hex> files."""
    shutil.copytree(live, copy)
    pack = read_pack(copy / "evidence.pack")
    (copy / "evidence").mkdir()
    for name in pack.items:
        (copy / "evidence" / name).write_bytes(pack.read(name))
    (copy / "evidence.pack").unlink()
    return copy


def test_finalize_commits_the_run_a_file_per_item_session_committed_byte_for_byte(
    tmp_path: Path,
) -> None:
    live = asyncio.run(record(tmp_path / "a", 6))
    legacy = _as_files(live, tmp_path / "b" / "sessions" / live.name)
    outcome = asyncio.run(finalize_session(live, tmp_path / "a"))
    before = asyncio.run(finalize_session(legacy, tmp_path / "b"))
    assert (outcome.run_id, before.run_id, outcome.calls) == (RUN_ID, RUN_ID, 6)
    assert not live.exists() and not legacy.exists()
    assert verify_run(outcome.path).ok
    files = _files(outcome.path)
    assert files == _files(before.path)
    evidence = RunEvidence.open(outcome.path).names()
    assert evidence == sorted({r["id"][9:] for r in _registered(outcome.path)})
    assert len(evidence) == 12  # 6 results, 3 requests and 3 responses, in the run's pack
    assert [name for name in files if name.startswith("evidence")] == [
        "evidence.idx",
        "evidence.pack",
    ]


def test_finalize_takes_the_live_packs_items_as_they_lie_instead_of_writing_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = asyncio.run(record(tmp_path, 6))
    live_pack = (live / "evidence.pack").read_bytes()
    appended: list[str] = []
    real_append = PackWriter.append

    def counted(writer: PackWriter, hex_digest: str, data: bytes) -> int:
        appended.append(hex_digest)
        return real_append(writer, hex_digest, data)

    monkeypatch.setattr(PackWriter, "append", counted)
    outcome = asyncio.run(finalize_session(live, tmp_path))
    assert outcome.run_id == RUN_ID
    assert appended == []  # all 12 items were the live pack's, copied in one write
    assert (outcome.path / "evidence.pack").read_bytes() == live_pack


def test_a_killed_session_with_a_pack_recovers_every_acknowledged_call(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT), str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    acknowledged = 0
    for line in process.stdout:
        acknowledged = int(line)
        if acknowledged == 60:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    process.stdout.close()
    (live,) = (tmp_path / "sessions").iterdir()
    outcome = asyncio.run(recover_session(live))
    assert outcome.calls >= acknowledged == 60
    incomplete = "its call block is incomplete (the server stopped before the call was answered)"
    assert all(
        message.endswith((incomplete, "stored for a call whose block is incomplete"))
        for message in outcome.dropped
    ), outcome.dropped
    assert verify_run(outcome.path).ok
    assert not live.exists()
    spec = json.loads((outcome.path / "spec.json").read_bytes())
    turns = [s["id"] for s in spec["steps"] if s["kind"] == "model"]
    assert turns == [f"turn-{n:08d}" for n in range(1, len(turns) + 1)]
    assert len(turns) in (outcome.calls // 2, outcome.calls // 2 - 1)  # killed before a turn


def _closed_session(root: Path, steps: int = 4) -> tuple[Path, list[dict[str, Any]]]:
    live = asyncio.run(record(root, steps))
    return live, _registered(live)


def test_an_item_torn_while_it_was_appended_is_dropped_and_the_rest_recovers(
    tmp_path: Path,
) -> None:
    live, records = _closed_session(tmp_path)
    pack = live / "evidence.pack"
    end = pack.stat().st_size
    torn = "cd" * 32
    with pack.open("ab") as file:  # killed inside the write of a ninth item: no event names it
        file.write(torn.encode() + b" 10\nabc")
    with pytest.raises(VerificationError) as refused:
        asyncio.run(finalize_session(live, tmp_path))
    assert refused.value.message == (
        f"session {live}: the live trace is damaged (evidence.pack item 9 at byte {end} "
        f"(evidence {torn}): torn: 3 of its 10 bytes; dropped with the 71 bytes from there "
        "on); run `toolproof verify --recover` on it"
    )
    outcome = asyncio.run(recover_session(live))
    assert (outcome.calls, outcome.dropped) == (
        4,
        [
            f"evidence.pack item 9 at byte {end} (evidence {torn}): torn: 3 of its 10 bytes; "
            "dropped with the 71 bytes from there on"
        ],
    )
    assert end == _item_offsets(records)[-1]
    assert verify_run(outcome.path).ok
    recovery = json.loads((outcome.path / "recovery.json").read_bytes())
    assert recovery == {"dropped": outcome.dropped, "kept_calls": 4, "session": live.name}


def test_a_whole_item_no_event_registers_is_reported_as_for_evidence_files(
    tmp_path: Path,
) -> None:
    live, _ = _closed_session(tmp_path)
    data = b'{"n":5,"text":"value 5"}'
    name = hashlib.sha256(data).hexdigest()
    with (live / "evidence.pack").open("ab") as file:  # killed after the item, before its block
        file.write(f"{name} {len(data)}\n".encode() + data)
    outcome = asyncio.run(recover_session(live))
    assert (outcome.calls, outcome.dropped) == (
        4,
        [f"evidence/{name}: stored for a call whose block is incomplete"],
    )
    assert verify_run(outcome.path).ok


def test_a_pack_that_lost_acknowledged_bytes_drops_the_steps_from_the_first_it_lost(
    tmp_path: Path,
) -> None:
    """A power loss can leave the trace on disk but not the end of the pack."""
    live, records = _closed_session(tmp_path)
    offsets = _item_offsets(records)
    pack = live / "evidence.pack"
    cut = offsets[7] + 90  # inside the bytes of the eighth item, turn 2's response
    pack.write_bytes(pack.read_bytes()[:cut])
    response, request = records[7], records[6]
    outcome = asyncio.run(recover_session(live))
    assert (outcome.calls, outcome.dropped) == (
        4,
        [
            "events 25 to 29 (step 'turn-00000002' and every step after it): event 27 "
            f"registers {response['path']}, whose bytes are not in the live session",
            f"evidence.pack item 8 at byte {offsets[7]} (evidence "
            f"{response['path'].removeprefix('evidence/')}): torn: "
            f"{90 - 64 - 1 - len(str(response['size'])) - 1} of its {response['size']} bytes; "
            f"dropped with the 90 bytes from there on",
            f"{request['path']}: stored for a call whose block is incomplete",
        ],
    )
    assert verify_run(outcome.path).ok
    spec = json.loads((outcome.path / "spec.json").read_bytes())
    assert [s["id"] for s in spec["steps"]] == [
        "call-00000001",
        "call-00000002",
        "turn-00000001",
        "call-00000003",
        "call-00000004",
    ]


def test_an_item_whose_bytes_changed_drops_it_and_everything_after_it(tmp_path: Path) -> None:
    live, records = _closed_session(tmp_path)
    offsets = _item_offsets(records)
    pack = live / "evidence.pack"
    data = bytearray(pack.read_bytes())
    data[offsets[3] - 3] ^= 0x20  # a byte of the third item, turn 1's request
    pack.write_bytes(bytes(data))
    outcome = asyncio.run(recover_session(live))
    request = records[2]["path"].removeprefix("evidence/")
    assert (outcome.calls, outcome.dropped) == (
        2,
        [
            "events 10 to 29 (step 'turn-00000001' and every step after it): event 11 "
            f"registers evidence/{request}, whose bytes are not in the live session",
            f"evidence.pack item 3 at byte {offsets[2]}: its bytes do not match its digest "
            f"{request}; dropped with the {len(data) - offsets[2]} bytes from there on",
        ],
    )
    assert verify_run(outcome.path).ok
