"""The ``llm`` reasoner against a real model server: llama.cpp serving SmolLM2-135M-Instruct.

``.ci/services`` starts the server on 127.0.0.1:8031 (``TOOLPROOF_LLM_BASE_URL`` points
elsewhere). The example spec's three questions are asked over the python-docs corpus
with ``temperature = 0`` and a fixed seed. What is checked is the evidence chain, not
the small model's quality: whatever it quotes is either located in the chunk it names
(and cited by byte span) or named as unresolved.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolproof.bundle.evidence import RunEvidence
from toolproof.config import load_toolset
from toolproof.contract.runs import RunSpec
from toolproof.errors import ReplayRefused
from toolproof.evidence.llm_answers import DEFAULT_SYSTEM_PROMPT
from toolproof.runs.replay import replay_run
from toolproof.runs.run import execute_run
from toolproof.runs.spec import load_spec
from toolproof.verify.verifier import verify_run

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "python-docs-llm"
BASE_URL = os.environ.get("TOOLPROOF_LLM_BASE_URL", "http://127.0.0.1:8031/v1")


def _server() -> str:
    try:
        # the server answers one request at a time: another test file (the second pytest
        # worker) may be mid-completion, so a busy server gets a generous wait
        models = httpx.get(f"{BASE_URL}/models", timeout=180).json()
    except (httpx.HTTPError, ValueError) as exc:
        message = f"no model server at {BASE_URL} ({exc}); run .ci/services"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return str(models["data"][0]["id"])


@pytest.fixture(scope="module")
def live_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    model = _server()
    work = tmp_path_factory.mktemp("python-docs-llm")
    shutil.copy(EXAMPLE / "toolproof.toml", work / "toolproof.toml")
    done = subprocess.run(
        [sys.executable, "-m", "toolproof", "corpus", "python-docs", str(work / "corpus")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    raw = tomllib.loads((EXAMPLE / "spec.toml").read_text(encoding="utf-8"))
    (work / "prompt.txt").write_text(DEFAULT_SYSTEM_PROMPT, encoding="utf-8")
    raw["reasoner"]["params"].update(
        base_url=BASE_URL, model=model, system_prompt_file=str(work / "prompt.txt")
    )
    raw["reasoner"]["params"].pop("base_url_env")
    raw["reasoner"]["params"].pop("model_env")
    (work / "spec.json").write_text(json.dumps(raw), encoding="utf-8")
    loaded = load_spec(work / "spec.json")

    async def go() -> Path:
        async with load_toolset(loaded.toolset_path) as toolset:
            outcome = await execute_run(
                RunSpec.model_validate(loaded.spec.to_json()), root=work, toolset=toolset
            )
        return outcome.path

    return asyncio.run(go()), work


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_bytes().splitlines()]


def test_the_real_model_run_verifies_and_cites_only_located_bytes(
    live_run: tuple[Path, Path], record_property: Any
) -> None:
    run_dir, _ = live_run
    verification = verify_run(run_dir)
    assert verification.ok, [str(f) for f in verification.failures]
    claims = json.loads((run_dir / "claims.json").read_bytes())
    assert len(claims) == 3
    produced = resolved = 0
    replies = [
        e["result"]["value"]["choices"][0]["message"]["content"]
        for e in _events(run_dir)
        if e["type"] == "tool_returned" and e["step"] == "derive"
    ]
    assert len(replies) == 3
    for claim in claims:
        tally = re.search(r"(\d+) of (\d+) quotes resolved", claim["reason"])
        if tally:
            resolved += int(tally.group(1))
            produced += int(tally.group(2))
        for index, support in enumerate(claim["supports"]):
            cited = RunEvidence.open(run_dir).read(
                support["evidence"], support["start"], support["end"]
            )
            assert cited.decode("utf-8") == claim["citations"][index]["text"]
        if claim["status"] == "validated":
            assert len(claim["supports"]) >= 1
        else:
            assert claim["supports"] == []
    record_property("quotes_produced", produced)
    record_property("quotes_resolved", resolved)
    print(f"\nllm example: {produced} quotes produced, {resolved} resolved; replies: {replies}")


def test_replay_is_frozen_and_identical(live_run: tuple[Path, Path]) -> None:
    run_dir, _ = live_run
    result = asyncio.run(replay_run(run_dir))
    assert (result.identical, result.live_calls) == (True, 0)


def test_a_changed_prompt_refuses_replay(live_run: tuple[Path, Path]) -> None:
    run_dir, work = live_run
    copy = work / "copy" / "runs" / run_dir.name
    shutil.copytree(run_dir, copy)
    prompt = work / "prompt.txt"
    prompt.write_text("Answer as you like.", encoding="utf-8")
    try:
        with pytest.raises(ReplayRefused, match=r"/messages/0/content \(system prompt\)"):
            asyncio.run(replay_run(copy))
    finally:
        prompt.write_text(DEFAULT_SYSTEM_PROMPT, encoding="utf-8")


def test_a_tampered_model_response_fails_verify(live_run: tuple[Path, Path]) -> None:
    run_dir, work = live_run
    copy = work / "tampered" / "runs" / run_dir.name
    shutil.copytree(run_dir, copy)
    response = next(
        e["evidence"]["id"]
        for e in _events(copy)
        if e["type"] == "evidence_registered" and e["step"] == "derive"
    )
    stored = RunEvidence.open(copy).read(response)
    path = copy / "evidence.pack"  # the response's bytes, changed where the pack holds them
    data = path.read_bytes()
    path.write_bytes(data.replace(stored, stored[:-2] + b" }"))
    verification = verify_run(copy)
    assert not verification.ok
    assert "evidence.pack" in {f.finding.file for f in verification.failures}
