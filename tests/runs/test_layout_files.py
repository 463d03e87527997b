"""A run in the files layout (evidence/<hex>, before the pack) still verifies, replays, shows.

``tests/fixtures/layout_files/run_d78f…`` was written by ``toolproof run
examples/tool-evidence/spec.toml`` before runs stored their evidence in
``evidence.pack`` and ``evidence.idx``; it is kept as it was written, byte for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import toolproof

from toolproof.bundle.evidence import LAYOUT_FILES, RunEvidence

RUN_ID = "run_d78f03378e40146862865d38231162d127ea4e93623660dda0942799cf739cf6"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "layout_files" / RUN_ID
PLUMS = "evidence_87961eb9586d1ed2f4793e72eb41c656dec4d6ba873c86ad4a6f0512da2f86f9"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / RUN_ID
    shutil.copytree(FIXTURE, copy)
    return copy


def test_the_fixture_is_in_the_files_layout(old_run: Path) -> None:
    evidence = RunEvidence.open(old_run)
    assert evidence.layout == LAYOUT_FILES
    assert [path.name for path in sorted((old_run / "evidence").iterdir())] == evidence.names()
    assert len(evidence.names()) == 3
    assert not (old_run / "evidence.pack").exists()


def test_an_old_layout_run_verifies_replays_and_shows(old_run: Path) -> None:
    verified = toolproof("verify", str(old_run), "--json")
    assert verified.returncode == 0, verified.stdout
    assert json.loads(verified.stdout)["ok"] is True
    replayed = toolproof("replay", str(old_run), "--json")
    assert replayed.returncode == 0, replayed.stdout
    answer = json.loads(replayed.stdout)
    assert (answer["identical"], answer["report_matches"], answer["live_calls"]) == (True, True, 0)
    assert answer["run_id"] == RUN_ID
    shown = toolproof("show", str(old_run), "--json")
    assert shown.returncode == 0, shown.stderr
    supports = [s for claim in json.loads(shown.stdout)["claims"] for s in claim["supports"]]
    plums = next(s for s in supports if s["evidence"] == PLUMS)
    assert (plums["file"], plums["start"], plums["end"]) == (f"evidence/{PLUMS[9:]}", 33, 65)
    assert (plums["text"], plums["verified"]) == ("Plums are kept cold on shelf B4.", True)
    assert all(support["verified"] for support in supports)


def test_a_tampered_old_layout_item_still_fails_verify(old_run: Path) -> None:
    item = old_run / "evidence" / PLUMS[9:]
    item.write_bytes(item.read_bytes().replace(b"B4", b"B5"))
    verified = toolproof("verify", str(old_run), "--json")
    assert verified.returncode == 2
    assert f"evidence/{PLUMS[9:]} has digest" in verified.stdout
