"""The git-history example: the real mcp-server-git through retry+timeout variants."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolproof.bundle.evidence import RunEvidence

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "git-history"
BIN = Path(sys.executable).parent


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


def toolproof(*args: str, cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolproof", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": path},
    )


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose first commit creates pyproject.toml, and the example beside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text("[project]\nname = 'demo'\n", encoding="utf-8")
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-q", "-m", "Start the demo package")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("demo\n", encoding="utf-8")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "Say what the demo is")
    work = repo / "examples" / "git-history"
    work.mkdir(parents=True)
    shutil.copy(EXAMPLE / "toolproof.toml", work / "toolproof.toml")
    spec = (EXAMPLE / "spec.toml").read_text(encoding="utf-8")
    spec = spec.replace("55962c381fe2f081019b97ac3a47d3082599933e", first)
    (work / "spec.toml").write_text(spec, encoding="utf-8")
    return work, first


def test_claims_cite_the_git_tool_results_and_replay_without_the_server(
    project: tuple[Path, str],
) -> None:
    work, first = project
    live_path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    assert shutil.which("mcp-server-git", path=live_path), "mcp-server-git must be installed"
    done = toolproof("run", "spec.toml", "--root", ".", "--json", cwd=work, path=live_path)
    assert done.returncode == 0, done.stderr
    run = work / "runs" / json.loads(done.stdout)["run_id"]
    claims = json.loads((run / "claims.json").read_bytes())
    assert [c["statement"] for c in claims] == [
        f"Ada Lovelace created pyproject.toml in commit {first}, because: Start the demo package",
        f"The latest commit is {git(work, 'rev-parse', 'HEAD')} by Ada Lovelace: "
        "Say what the demo is",
    ]
    assert [c["status"] for c in claims] == ["validated", "validated"]
    assert [c["text"] for c in claims[0]["citations"]] == [
        "Ada Lovelace",
        "pyproject.toml",
        first,
        "Start the demo package",
    ]
    events = [json.loads(line) for line in (run / "trace.jsonl").read_bytes().splitlines()]
    called = [e["call"]["tool"] for e in events if e["type"] == "tool_called"]
    assert called == ["git_show_retry_timeout", "git_log_retry_timeout"]
    for claim in claims:
        for support, citation in zip(claim["supports"], claim["citations"], strict=True):
            data = RunEvidence.open(run).read(support["evidence"])
            assert data[support["start"] : support["end"]].decode("utf-8") == citation["text"]

    bare_path = os.pathsep.join(
        part
        for part in os.environ.get("PATH", "").split(os.pathsep)
        if part and not (Path(part) / "mcp-server-git").exists()
    )
    assert shutil.which("mcp-server-git", path=bare_path) is None
    replay = toolproof("replay", run.name, "--json", cwd=work, path=bare_path)
    assert replay.returncode == 0, replay.stderr
    result = json.loads(replay.stdout)
    assert (result["identical"], result["live_calls"], result["descriptor_compared"]) == (
        True,
        0,
        False,
    )


def test_the_example_runs_on_this_repository(tmp_path: Path) -> None:
    live_path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    done = toolproof(
        "run", "spec.toml", "--root", str(tmp_path), "--json", cwd=EXAMPLE, path=live_path
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["outcome"] == "passed"
    verify = toolproof(
        "verify", outcome["run_id"], "--root", str(tmp_path), cwd=EXAMPLE, path=live_path
    )
    assert verify.returncode == 0, verify.stderr
