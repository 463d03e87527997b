from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolproof.bundle.manifest import check_manifest
from toolproof.bundle.rundir import TEMP_PREFIX, RunDirectoryWriter


def _write(writer: RunDirectoryWriter, text: str) -> None:
    writer.write_json("spec.json", {"task": text})
    writer.write_bytes("evidence/abc", b"raw")
    writer.write_json("timings.json", {"wall": text})


def test_commit_renames_into_runs_and_dedupes(tmp_path: Path) -> None:
    with RunDirectoryWriter(tmp_path) as writer:
        _write(writer, "a")
        first = writer.commit()
    assert first.path.parent == tmp_path / "runs"
    assert not first.reused
    assert json.loads((first.path / "manifest.json").read_bytes())["run_id"] == first.run_id
    manifest, _, findings = check_manifest(first.path)
    assert findings == [] and manifest is not None
    assert [entry.path for entry in manifest.files] == ["evidence/abc", "spec.json", "timings.json"]
    with RunDirectoryWriter(tmp_path) as writer:
        writer.write_json("spec.json", {"task": "a"})
        writer.write_bytes("evidence/abc", b"raw")
        writer.write_json("timings.json", {"wall": "other time"})  # not part of the run id
        again = writer.commit()
    assert (again.run_id, again.reused) == (first.run_id, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_an_exception_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), RunDirectoryWriter(tmp_path) as writer:
        _write(writer, "a")
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_stale_temp_dirs_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = tmp_path / f"{TEMP_PREFIX}{dead.stdout.strip()}-xyz"
    stale.mkdir()
    mine = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-keep"
    mine.mkdir()
    writer = RunDirectoryWriter(tmp_path)
    assert not stale.exists()
    assert mine.exists()
    writer.discard()


def test_commit_fsyncs_the_runs_own_files_and_folders_never_the_whole_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fault we cannot cause for real: watch the calls. sync(2) flushes every file
    # system of the machine; the run's own files and folders are enough.
    def machine_wide() -> None:
        raise AssertionError("os.sync() flushes the whole machine")

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "sync", machine_wide)
    monkeypatch.setattr(os, "fsync", fsync)
    with RunDirectoryWriter(tmp_path) as writer:
        _write(writer, "durable")
        temp = writer.temp.resolve()
        committed = writer.commit()
    assert committed.path.is_dir()
    for name in ("evidence/abc", "spec.json", "timings.json", "evidence", "manifest.json"):
        assert str(temp / name) in synced, name
    assert str(temp) in synced
