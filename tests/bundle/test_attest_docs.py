"""The Python block of docs/attestations.md runs as written, from an artifact root."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runs_support import Counter, base_spec, make_toolset, run

from toolproof.bundle.attest import attest_run
from toolproof.bundle.dsse import generate_key

DOC = Path(__file__).resolve().parents[2] / "docs" / "attestations.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)


def test_the_doc_has_its_example() -> None:
    assert len(BLOCKS) == 1


def test_verifying_with_securesystemslib_and_in_toto_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = run(tmp_path, base_spec(), make_toolset(Counter()))
    attest_run(outcome.path, generate_key(tmp_path / "producer.key"))
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[0], "docs/attestations.md[0]", "exec"), {"__name__": "docs_attest"})
    assert capsys.readouterr().out == f"{outcome.run_id} passed\n"
