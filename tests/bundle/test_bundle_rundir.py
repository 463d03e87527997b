from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolproof.bundle import durable
from toolproof.bundle.manifest import check_manifest
from toolproof.bundle.rundir import TEMP_PREFIX, RunDirectoryWriter, remove_aside
from toolproof.runs.unfinished import unfinished_sessions


def _write(writer: RunDirectoryWriter, text: str) -> None:
    writer.write_json("spec.json", {"task": text})
    writer.write_bytes("evidence.pack", b"raw")
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
    assert [entry.path for entry in manifest.files] == [
        "evidence.pack",
        "spec.json",
        "timings.json",
    ]
    with RunDirectoryWriter(tmp_path) as writer:
        writer.write_json("spec.json", {"task": "a"})
        writer.write_bytes("evidence.pack", b"raw")
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
    for name in ("evidence.pack", "spec.json", "timings.json", "manifest.json"):
        assert str(temp / name) in synced, name
    assert str(temp) in synced


def _watch_syncs(monkeypatch: pytest.MonkeyPatch, syncfs: bool) -> tuple[list[str], list[str]]:
    """Record every fsync'd path and every syncfs'd fd's path (the real calls still run)."""
    fsynced: list[str] = []
    whole: list[str] = []
    real_fsync, real_syncfs = os.fsync, durable._SYNCFS

    def fsync(fd: int) -> None:
        fsynced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def watched_syncfs(fd: int) -> None:
        whole.append(os.readlink(f"/proc/self/fd/{fd}"))
        if real_syncfs is not None:
            real_syncfs(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(durable, "_SYNCFS", watched_syncfs if syncfs else None)
    return fsynced, whole


def _evidence_of_a_recorder(writer: RunDirectoryWriter) -> str:
    """An evidence pack written as the recorder writes one: created, never fsynced."""
    name = "evidence.pack"
    (writer.temp / name).write_bytes(b"result")
    writer.record(name, 6, "sha256:" + "0" * 64)
    return name


def test_commit_makes_the_files_durable_with_one_syncfs_then_fsyncs_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RunDirectoryWriter(tmp_path) as writer:
        writer.write_json("spec.json", {"task": "a"})
        name = _evidence_of_a_recorder(writer)
        temp = writer.temp.resolve()
        fsynced, whole = _watch_syncs(monkeypatch, syncfs=True)
        writer.commit()
    assert whole == [str(temp)]
    # the files are the syncfs's: only the manifest (written with its own fsync) and the
    # folders, deepest first, the run directory last, then runs/ after the rename
    assert fsynced == [
        str(temp / "manifest.json"),
        str(temp),
        str(tmp_path.resolve() / "runs"),
    ]
    assert str(temp / name) not in fsynced


def test_commit_fsyncs_every_file_where_the_platform_has_no_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RunDirectoryWriter(tmp_path) as writer:
        writer.write_json("spec.json", {"task": "a"})
        name = _evidence_of_a_recorder(writer)
        temp = writer.temp.resolve()
        fsynced, whole = _watch_syncs(monkeypatch, syncfs=False)
        writer.commit()
    assert whole == []
    assert fsynced == [
        str(temp / "manifest.json"),
        str(temp / name),
        str(temp / "spec.json"),
        str(temp),
        str(tmp_path.resolve() / "runs"),
    ]


def test_remove_aside_clears_a_directory_and_the_leftover_a_killed_removal_left(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    live = sessions / "nightly-42.4"
    (live / "evidence").mkdir(parents=True)
    (live / "evidence" / "item").write_bytes(b"x")
    (live / "session.json").write_bytes(b"{}")
    leftover = sessions / ".nightly-42.4.discarded"  # a process killed while removing it
    leftover.mkdir()
    (leftover / "trace.jsonl").write_bytes(b"{}")
    listed = [session["directory"] for session in unfinished_sessions(tmp_path)]
    assert listed == ["nightly-42.4"]  # the leftover is not a live session
    remove_aside(live)
    assert list(sessions.iterdir()) == []
    assert unfinished_sessions(tmp_path) == []
