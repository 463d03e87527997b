"""Property: any single-byte flip, truncation or deletion of any run file is caught."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runs_support import Counter, base_spec, make_toolset, run, run_files

from toolproof.errors import ReplayRefused
from toolproof.runs.replay import replay_run
from toolproof.verify.verifier import verify_run


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("pristine"), base_spec(), make_toolset(Counter())).path


def _copy(pristine: Path, scratch: Path) -> Path:
    target = scratch / "runs" / pristine.name
    shutil.copytree(pristine, target)
    return target


def _assert_caught(run_dir: Path, rel: str) -> None:
    verification = verify_run(run_dir)
    assert not verification.ok
    first = verification.failures[0]
    assert (first.check, first.finding.file) == ("manifest", rel), str(first)
    counter = Counter()
    with pytest.raises(ReplayRefused) as info:
        asyncio.run(replay_run(run_dir, toolset=make_toolset(counter).descriptor()))
    assert info.value.fields["check"] == "manifest"
    assert counter.calls == 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flipping_any_byte_of_any_file_is_caught(pristine: Path, data: st.DataObject) -> None:
    files = run_files(pristine)
    rel = data.draw(st.sampled_from(files), label="file")
    size = (pristine / rel).stat().st_size
    offset = data.draw(st.integers(0, size - 1), label="offset")
    mask = data.draw(st.integers(1, 255), label="mask")
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = _copy(pristine, Path(scratch))
        raw = bytearray((run_dir / rel).read_bytes())
        raw[offset] ^= mask
        (run_dir / rel).write_bytes(bytes(raw))
        _assert_caught(run_dir, rel)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncating_or_deleting_any_file_is_caught(pristine: Path, data: st.DataObject) -> None:
    files = run_files(pristine)
    rel = data.draw(st.sampled_from(files), label="file")
    size = (pristine / rel).stat().st_size
    keep = data.draw(st.one_of(st.none(), st.integers(0, size - 1)), label="keep")
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = _copy(pristine, Path(scratch))
        if keep is None:
            (run_dir / rel).unlink()
        else:
            (run_dir / rel).write_bytes((run_dir / rel).read_bytes()[:keep])
        _assert_caught(run_dir, rel)
