"""Runs name their lock: the lock digest in the runtime descriptor, verify, replay --config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_support import Ran, toolproof

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"


def _cli(*args: str, cwd: Path) -> Ran:
    return toolproof(*args, cwd=cwd)


def test_a_run_names_its_lock_and_replay_refuses_another(tmp_path: Path) -> None:
    for name in ("spec.toml", "toolproof.toml", "evidence_tools.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    unlocked = json.loads(_cli("run", "spec.toml", "--root", "a", "--json", cwd=tmp_path).stdout)
    locked_doc = json.loads(_cli("lock", "--json", cwd=tmp_path).stdout)
    digest = locked_doc["digest"]
    ran = _cli("run", "spec.toml", "--root", "b", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    assert run_id != unlocked["run_id"]  # the lock digest is part of the run id
    runtime = json.loads((tmp_path / "b" / "runs" / run_id / "runtime.json").read_bytes())
    assert runtime["toolset"]["lock"] == digest
    unlocked_runtime = tmp_path / "a" / "runs" / unlocked["run_id"] / "runtime.json"
    assert "lock" not in json.loads(unlocked_runtime.read_bytes())["toolset"]

    verify = _cli("verify", run_id, "--root", "b", cwd=tmp_path)
    assert f"tool lock: {digest}" in verify.stdout.splitlines()
    assert (
        json.loads(_cli("verify", run_id, "--root", "b", "--json", cwd=tmp_path).stdout)["lock"]
        == digest
    )

    tools = tmp_path / "evidence_tools.py"
    tools.write_text(
        tools.read_text(encoding="utf-8").replace('"""Look up', '"""Please look up'),
        encoding="utf-8",
    )
    assert _cli("lock", "--update", cwd=tmp_path).returncode == 0
    new_digest = json.loads(_cli("lock", "--check", "--json", cwd=tmp_path).stdout)["digest"]
    replay = _cli("replay", run_id, "--root", "b", "--config", "toolproof.toml", cwd=tmp_path)
    assert replay.returncode == 2
    message = " ".join(replay.stderr.split())
    assert (
        f"the runtime descriptor changed: the tool lock changed ({digest} -> {new_digest}); "
        "changed stock" in message
    )
