"""The run commands as a user runs them: in process, and as real ``toolproof`` processes
where the process is the point (an interrupted run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import Ran, toolproof

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool-evidence"
TOOLPROOF = [str(Path(sys.executable).parent / "toolproof")]

TOOLS = '''
import asyncio
import os

import toolproof


def _count() -> None:
    with open(os.environ["TP_COUNT"], "a", encoding="utf-8") as file:
        file.write("x")


@toolproof.tool(read_only=True)
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    _count()
    await asyncio.sleep(seconds)
    return "slept"


@toolproof.tool(read_only=True)
def lookup(item: str) -> dict:
    """Look an item up."""
    _count()
    return {"item": item, "count": len(item)}
'''


def _cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Ran:
    return toolproof(*args, cwd=cwd, env=env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "cli_tools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "toolproof.toml").write_text('[[python]]\nmodule = "cli_tools"\n', encoding="utf-8")
    (tmp_path / "count").write_text("", encoding="utf-8")
    return tmp_path


def _spec(project: Path, steps: str, extra: str = "") -> Path:
    path = project / "spec.toml"
    path.write_text(f'task = "t"\n{extra}\n{steps}', encoding="utf-8")
    return path


LOOKUP = '[[steps]]\nid = "look"\ntool = "lookup"\narguments = { item = "pear" }\n'


def test_run_verify_show_replay_diff_on_the_example(tmp_path: Path) -> None:
    root = str(tmp_path / "artifacts")
    ran = _cli("run", str(EXAMPLE / "spec.toml"), "--root", root, "--json")
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    run_id = result["run_id"]
    assert (result["outcome"], result["claims"], result["tool_calls"]) == ("passed", 4, 3)
    again = _cli("run", str(EXAMPLE / "spec.toml"), "--root", str(tmp_path / "other"), "--json")
    assert json.loads(again.stdout)["run_id"] == run_id  # another process, same work, same id
    verified = _cli("verify", run_id, "--root", root, "--json")
    assert verified.returncode == 0
    assert json.loads(verified.stdout)["ok"] is True
    shown = json.loads(_cli("show", run_id, "--root", root, "--json").stdout)
    supports = shown["claims"][1]["supports"]
    assert [(s["text"], s["verified"]) for s in supports] == [("12", True), ("A1", True)]
    assert supports[0]["file"].startswith("evidence/")
    replayed = _cli(
        "replay", run_id, "--root", root, "--config", str(EXAMPLE / "toolproof.toml"), "--json"
    )
    assert replayed.returncode == 0, replayed.stderr
    document = json.loads(replayed.stdout)
    assert (document["identical"], document["live_calls"], document["descriptor_compared"]) == (
        True,
        0,
        True,
    )
    diffed = json.loads(_cli("diff", run_id, f"runs/{run_id}", "--root", root, "--json").stdout)
    assert diffed["identical"] is True
    human = _cli("show", run_id, "--root", root)
    assert "There are 12 apples, kept on shelf A1." in human.stdout


def test_tampered_run_fails_verify_and_replay_with_exit_2(project: Path) -> None:
    env = {"TP_COUNT": str(project / "count")}
    ran = _cli("run", str(_spec(project, LOOKUP)), "--root", str(project), "--json", env=env)
    run_id = json.loads(ran.stdout)["run_id"]
    assert (project / "count").read_text(encoding="utf-8") == "x"
    evidence = project / "runs" / run_id / "evidence.pack"
    evidence.write_bytes(evidence.read_bytes().replace(b"pear", b"bear"))
    verified = _cli("verify", run_id, "--root", str(project))
    assert verified.returncode == 2
    assert "[manifest] evidence.pack: evidence.pack has digest" in (
        verified.stderr.replace("\n", "")
    )
    replayed = _cli(
        "replay",
        run_id,
        "--root",
        str(project),
        "--config",
        str(project / "toolproof.toml"),
        "--json",
        env=env,
    )
    assert replayed.returncode == 2
    assert json.loads(replayed.stdout)["refused"] is True
    assert (project / "count").read_text(encoding="utf-8") == "x"  # no live call


def test_missing_directories_and_unknown_runs_are_input_errors(tmp_path: Path) -> None:
    nowhere = _cli("verify", "../elsewhere", "--root", str(tmp_path), cwd=tmp_path)
    assert nowhere.returncode == 1
    assert nowhere.stderr == (
        f"error: run '../elsewhere': no directory at ../elsewhere nor "
        f"{tmp_path}/../elsewhere, and it is not a run id (run_ followed by lowercase hex)\n"
    )
    # with the default root ".", the path and the path in the root are one path: named once
    typo = _cli("show", "runs/run_8f55", cwd=tmp_path)
    assert typo.returncode == 1
    assert typo.stderr == (
        "error: run 'runs/run_8f55': no directory at runs/run_8f55, and it is not a run id "
        "(run_ followed by lowercase hex)\n"
    )
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01")
    for command in ("verify", "show", "replay"):
        a_file = _cli(command, "bin.dat", cwd=tmp_path)
        assert (a_file.returncode, a_file.stderr) == (
            1,
            "error: bin.dat is a file, not a run directory\n",
        )
    missing = _cli("verify", "run_" + "0" * 64, "--root", str(tmp_path))
    assert missing.returncode == 1
    assert missing.stderr.replace("\n", "") == (
        f"error: run 'run_{'0' * 64}': no run in {tmp_path}/runs has this id or prefix "
        f"(list them: toolproof runs list --root {tmp_path})"
    )


def test_bad_spec_is_an_input_error(project: Path) -> None:
    spec = _spec(project, LOOKUP, extra='colour = "red"')
    ran = _cli("run", str(spec), "--root", str(project))
    assert ran.returncode == 1
    assert ran.stderr == f"error: {spec}: colour: unknown key (not part of the run spec format)\n"
    assert not (project / "runs").exists()
    missing = _cli("run", str(project / "nope.toml"), "--root", str(project))
    assert missing.returncode == 1
    assert missing.stderr == (
        f"error: {project / 'nope.toml'}: (file): cannot read: No such file or directory\n"
    )


def test_failing_report_exits_2(project: Path) -> None:
    steps = LOOKUP + '[[steps]]\nid = "again"\ntool = "lookup"\narguments = { item = 3 }\n'
    ran = _cli(
        "run",
        str(_spec(project, steps)),
        "--root",
        str(project),
        "--json",
        env={"TP_COUNT": str(project / "count")},
    )
    assert ran.returncode == 2
    failures = json.loads(ran.stdout)["failures"]
    assert failures[0].startswith(
        "[required-steps] trace.jsonl: step 'again' failed: invalid_arguments:"
    )


SLOW = '[[steps]]\nid = "nap"\ntool = "slow"\narguments = { seconds = 60 }\n'


_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _start_slow_run(project: Path) -> subprocess.Popen[str]:
    spec, root = _spec(project, SLOW), str(project / "art")
    # SIGINT at its default disposition and unblocked in the child, as a terminal's Ctrl-C
    # finds it: an ignored or blocked signal stays so across exec, so a parent left
    # ignoring or blocking it would make the child miss the test's Ctrl-C (the exec keeps
    # the pid the test signals)
    process = subprocess.Popen(
        [sys.executable, "-c", _DEFAULT_SIGINT, *TOOLPROOF, "run", str(spec), "--root", root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TP_COUNT": str(project / "count")},
    )
    deadline = time.monotonic() + 30
    while (project / "count").read_text(encoding="utf-8") != "x":  # the tool is running
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return process


def test_kill_9_mid_run_leaves_nothing_under_runs(project: Path) -> None:
    process = _start_slow_run(project)
    temp = list((project / "art").glob(".tmp-run-*"))
    assert len(temp) == 1 and (temp[0] / "trace.jsonl").exists()
    process.kill()
    process.communicate(timeout=10)
    assert not (project / "art" / "runs").exists()


def test_ctrl_c_mid_run_removes_the_temporary_directory(project: Path) -> None:
    process = _start_slow_run(project)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=20)
    assert process.returncode != 0
    assert sorted(p.name for p in (project / "art").iterdir()) == []
