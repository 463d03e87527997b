"""examples/agent-pydantic-ai end to end: a pydantic-ai agent over the real mcp-server-git.

The example is copied beside a fixture repository (two commits by Ada Lovelace), as
tests/runs/test_git_history.py does, and run as a script: record the agent's session,
verify it (the answer's citations looked up byte for byte), replay it frozen (tool
results and model turns served from the recording). Once with
the scripted model (FunctionModel), once against the real model server of
``TOOLPROOF_LLM_BASE_URL`` (llama.cpp serving SmolLM2-135M-Instruct; what is checked
there is the record, not the small model's answer).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolproof.bundle.evidence import RunEvidence

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent-pydantic-ai"
BIN = Path(sys.executable).parent
BASE_URL = os.environ.get("TOOLPROOF_LLM_BASE_URL", "http://127.0.0.1:8031/v1")
LIVE_PATH = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
READ_ONLY = [
    "git_branch",
    "git_diff",
    "git_diff_staged",
    "git_diff_unstaged",
    "git_log",
    "git_show",
    "git_status",
]


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def example(*args: str, cwd: Path, path: str = LIVE_PATH) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "agent.py", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": path},
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose latest commit adds README.md, and the example inside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-q", "-m", "Start the demo package")
    (repo / "README.md").write_text("demo\n", encoding="utf-8")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "Say what the demo is")
    work = repo / "examples" / "agent-pydantic-ai"
    work.mkdir(parents=True)
    for name in ("agent.py", "toolproof.toml"):
        shutil.copy(EXAMPLE / name, work / name)
    assert shutil.which("mcp-server-git", path=LIVE_PATH), "mcp-server-git must be installed"
    return work, git(repo, "rev-parse", "HEAD")


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]


def _cited_bytes(run: Path) -> list[str]:
    """Each support of the answer's claim, read from the evidence bytes it points at."""
    claim = json.loads((run / "claims.json").read_bytes())[0]
    texts = []
    for support in claim["supports"]:
        data = RunEvidence.open(run).read(support["evidence"], support["start"], support["end"])
        texts.append(data.decode("utf-8"))
    return texts


def _shown_tools(run: Path) -> list[str]:
    """The tool names each recorded model request showed the model, the same in each."""
    shown = set()
    for turn in (e for e in _events(run) if e["type"] == "model_turn"):
        request = json.loads(RunEvidence.open(run).read(turn["request"]))
        shown.add(tuple(tool["name"] for tool in request["parameters"]["function_tools"]))
    (names,) = shown
    return sorted(names)


def test_the_scripted_agent_records_verifies_and_replays(
    project: tuple[Path, str], tmp_path: Path
) -> None:
    work, head = project
    done = example("--root", str(tmp_path / "root"), "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("model: scripted (a pydantic-ai FunctionModel")
    outcome = json.loads(done.stdout)
    # only the read-only git tools are shown to the model (toolproof.toml's include filter)
    assert outcome["tools"] == READ_ONLY
    assert done.stderr.splitlines()[1] == (
        f"tools: {', '.join(READ_ONLY)} (read-only: toolproof.toml's include filter binds "
        "no git tool that writes)"
    )
    # the answer cites the git_log call by the id the model gave it (recorded on the call)
    git_log = next(e for e in _events(Path(outcome["run"])) if e["type"] == "tool_called")
    cited = git_log["model_call_id"]
    assert cited.startswith("pyd_ai_") and git_log["model_turn"] == "turn-00000001"
    assert outcome["answer"] == (
        f'The latest commit, {head}, was made by "Author: Ada Lovelace" [{cited}], and its '
        f'message says why: "Message: Say what the demo is" [{cited}]. It changed README.md.'
    )
    citations = ["Author: Ada Lovelace", "Message: Say what the demo is"]
    assert outcome["claim"] == {"status": "validated", "citations": citations}
    assert (outcome["verified"], outcome["failures"]) == (True, [])
    assert outcome["replay"] == {"identical": True, "calls": 2, "turns": 3, "live_calls": 0}
    run = Path(outcome["run"])
    called = [e["call"] for e in _events(run) if e["type"] == "tool_called"]
    assert called[0]["tool"] == "git_log" and called[1]["tool"] == "git_show"
    assert (called[0]["arguments"], called[1]["arguments"]) == (
        {"repo_path": "../..", "max_count": 1},
        {"repo_path": "../..", "revision": head},
    )
    assert _cited_bytes(run) == citations
    verify = subprocess.run(
        [sys.executable, "-m", "toolproof", "verify", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stderr

    kinds = [e["type"] for e in _events(run) if e["type"] in ("model_turn", "tool_called")]
    assert kinds == ["model_turn", "tool_called", "model_turn", "tool_called", "model_turn"]
    assert _shown_tools(run) == READ_ONLY  # what every model request held

    again = example("--replay", str(run), cwd=work)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == (
        "replay: identical, 2 tool calls and 3 model turns served from the recording, 0 live calls"
    )
    by_id = example("--replay", run.name, "--root", str(tmp_path / "root"), cwd=work)
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout.splitlines()[-1] == again.stdout.splitlines()[-1]
    # the CLI replays it too, with the module's scripted agent (README.md beside agent.py)
    replay = ["replay", run.name, "--root", str(tmp_path / "root"), "--config", "toolproof.toml"]
    cli = subprocess.run(
        [sys.executable, "-m", "toolproof", *replay, "--agent", "agent:agent"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": LIVE_PATH},
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines()[-1] == (
        "agent replay identical: 2 tool calls and 3 model turns served from the recording, "
        "0 live calls; the run verifies"
    )
    # as the README shows it: the run alone, no --config; no mcp-server-git on the PATH
    alone = subprocess.run(
        [sys.executable, "-m", "toolproof", *replay[:4], "--agent", "agent:agent"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": str(tmp_path)},
    )
    assert (alone.returncode, alone.stdout.splitlines()[-1:]) == (
        0,
        cli.stdout.splitlines()[-1:],
    ), alone.stderr


def test_a_tool_that_may_write_is_never_shown_to_the_model(
    project: tuple[Path, str], tmp_path: Path
) -> None:
    work, _ = project
    config = (work / "toolproof.toml").read_text(encoding="utf-8")
    unfiltered = re.sub(r"include = \[[^\]]*\]\n", "", config)
    assert unfiltered != config
    (work / "toolproof.toml").write_text(unfiltered, encoding="utf-8")
    done = example("--root", str(tmp_path / "root"), cwd=work)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "refusing to show a live model tools that may write: git_add, git_checkout, "
        "git_commit, git_create_branch, git_reset (each tool must declare readOnlyHint: "
        "see toolproof.toml's include filter)"
    )
    assert not (tmp_path / "root" / "runs").exists() or not any(
        (tmp_path / "root" / "runs").iterdir()
    )


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _model_server() -> str:
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


@pytest.mark.service
@pytest.mark.timeout(900)
def test_the_agent_with_a_real_model_server_records_verifies_and_replays(
    project: tuple[Path, str], tmp_path: Path
) -> None:
    model = _model_server()
    work, _ = project
    done = example(
        "--root",
        str(tmp_path / "root"),
        "--base-url",
        BASE_URL,
        "--model",
        model,
        "--json",
        cwd=work,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"model: {model} at {BASE_URL}")
    outcome = json.loads(done.stdout)
    run = Path(outcome["run"])
    events = _events(run)
    calls = [e for e in events if e["type"] == "tool_called"]
    # whatever the small model did, the record holds it and the answer cites only bytes
    # the git_log results really hold (the Author and Message lines the agent quotes)
    logs = [
        e["result"]["value"]
        for e in events
        if e["type"] == "tool_returned"
        and e["result"]["ok"]
        and next(c for c in calls if c["call_id"] == e["call_id"])["call"]["tool"] == "git_log"
    ]
    expected = [
        m.group(0)
        for log in logs
        for prefix in ("Author: ", "Message: ")
        for m in [re.search(rf"^{prefix}[^\n]*", str(log), re.MULTILINE)]
        if m is not None
    ]
    status = "validated" if expected else "unvalidated"
    assert outcome["claim"] == {"status": status, "citations": expected}
    assert _cited_bytes(run) == expected
    assert (outcome["verified"], outcome["failures"]) == (True, [])
    turns = [e for e in events if e["type"] == "model_turn"]
    assert len(turns) >= 1
    assert _shown_tools(run) == READ_ONLY  # the live model was never shown a writing tool
    assert outcome["replay"] == {
        "identical": True,
        "calls": len(calls),
        "turns": len(turns),
        "live_calls": 0,
    }
    # offline: the replay asks no model, so an endpoint that answers nothing changes nothing
    dead = "http://127.0.0.1:9/v1"
    offline = example("--replay", str(run), "--base-url", dead, "--model", model, cwd=work)
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.splitlines()[-1] == (
        f"replay: identical, {_counted(len(calls), 'tool call')} and "
        f"{_counted(len(turns), 'model turn')} served from the recording, 0 live calls"
    )
